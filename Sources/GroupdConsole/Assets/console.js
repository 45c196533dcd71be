// groupd operator console: one page, hash routes, the Connect JSON API of this origin.
// The admin token lives in a variable of this closure only: never in localStorage, sessionStorage,
// cookies or the URL. Reloading the page signs out.
"use strict";
(() => {
  // ---------------------------------------------------------------------------------------------
  // State

  let token = null;          // the pasted admin token
  let claims = null;         // its payload, decoded for display (the server checks it)
  let pendingRoute = null;   // where to go after signing in

  // ---------------------------------------------------------------------------------------------
  // DOM helpers: every text goes through textContent, never innerHTML (names are user data).

  const $ = (selector, root = document) => root.querySelector(selector);

  function h(tag, attrs, ...children) {
    const element = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
      else if (name === "dataset") Object.assign(element.dataset, value);
      else if (name === "text") element.textContent = value;
      else element.setAttribute(name, value === true ? "" : String(value));
    }
    append(element, children);
    return element;
  }

  function append(parent, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      parent.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return parent;
  }

  function table(id, headings, rows, emptyText) {
    if (rows.length === 0) return h("p", { class: "empty", id: id && id + "-empty" }, emptyText || "None.");
    return h("table", { id },
      h("thead", {}, h("tr", {}, headings.map((text) => h("th", {}, text)))),
      h("tbody", {}, rows));
  }

  function kv(pairs) {
    return h("dl", { class: "kv" }, pairs.filter(Boolean).map(([key, value]) => [h("dt", {}, key), h("dd", {}, value)]));
  }

  function badge(text, kind) { return h("span", { class: "badge" + (kind ? " " + kind : "") }, text); }

  // ---------------------------------------------------------------------------------------------
  // Names of the API's enums, for people

  const strip = (value, prefix) => (value || "").startsWith(prefix) ? value.slice(prefix.length) : (value || "");
  const words = (value) => value ? value.toLowerCase().replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase()) : "—";
  const typeName = (type) => ({ GROUP_TYPE_WORK: "Work", GROUP_TYPE_PUBLIC: "Public", GROUP_TYPE_MEETING: "Meeting",
    GROUP_TYPE_AV_CHAT_ROOM: "AVChatRoom" })[type] || words(strip(type, "GROUP_TYPE_"));
  const roleName = (role) => words(strip(role || "MEMBER_ROLE_MEMBER", "MEMBER_ROLE_"));
  const scopeName = (scope) => ({ OPERATOR_SCOPE_NOBODY: "Nobody (the backend only)", OPERATOR_SCOPE_OWNER: "The owner",
    OPERATOR_SCOPE_OWNER_AND_ADMINS: "The owner and admins", OPERATOR_SCOPE_ALL_MEMBERS: "Every member" })[scope]
    || words(strip(scope, "OPERATOR_SCOPE_"));

  function time(value) {
    if (!value) return "—";
    const date = new Date(value);
    if (isNaN(date)) return value;
    const pad = (n) => String(n).padStart(2, "0");
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  }

  function isMuted(member) { return member.muteUntil && new Date(member.muteUntil) > new Date(); }

  function bytesText(base64) {
    if (!base64) return "";
    try {
      const binary = atob(base64);
      const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      return "base64:" + base64;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Calls: Connect unary JSON, POST /groupd.v1.<Service>/<Method> on this origin

  class ApiError extends Error {
    constructor(code, message, reason, metadata, httpStatus) {
      super(message);
      this.code = code;
      this.reason = reason || "";
      this.metadata = metadata || {};
      this.httpStatus = httpStatus;
    }
    static from(httpStatus, json, text) {
      if (!json || typeof json !== "object") return new ApiError("unknown", text || `HTTP ${httpStatus}`, "", {}, httpStatus);
      let reason = "", metadata = {};
      for (const detail of json.details || []) {
        if (detail.type === "google.rpc.ErrorInfo" && detail.debug) {
          reason = detail.debug.reason || "";
          metadata = detail.debug.metadata || {};
        }
      }
      return new ApiError(json.code || "unknown", json.message || "", reason, metadata, httpStatus);
    }
  }

  const stats = { calls: [], errors: new Map() };

  function record(reason) {
    const now = performance.now();
    stats.calls.push(now);
    if (reason) {
      stats.errors.set(reason, (stats.errors.get(reason) || 0) + 1);
      showStats();
    }
  }

  function showStats() {
    const now = performance.now();
    while (stats.calls.length && stats.calls[0] < now - 10000) stats.calls.shift();
    $("#stats-rate").textContent = (stats.calls.length / 10).toFixed(1);
    const errors = [...stats.errors].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([reason, n]) => `${reason} ×${n}`);
    $("#stats-errors").textContent = errors.length ? errors.join(", ") : "none";
  }
  setInterval(showStats, 1000);

  function headers(contentType, operator) {
    const result = { "Content-Type": contentType, "Connect-Protocol-Version": "1", "Authorization": "Bearer " + token };
    if (operator) result["x-operator-id"] = operator;
    return result;
  }

  async function call(service, method, body, options = {}) {
    let response;
    try {
      response = await fetch(`/groupd.v1.${service}/${method}`, {
        method: "POST", headers: headers("application/json", options.operator), body: JSON.stringify(body || {}),
        credentials: "omit", cache: "no-store",
      });
    } catch (error) {
      record("NETWORK_ERROR");
      throw new ApiError("unavailable", `cannot reach groupd: ${error.message}`, "NETWORK_ERROR");
    }
    const text = await response.text();
    let json = null;
    try { json = text ? JSON.parse(text) : {}; } catch { /* not JSON: reported below */ }
    if (!response.ok) {
      const error = ApiError.from(response.status, json, text);
      record(error.reason || error.code);
      throw error;
    }
    record(null);
    return json || {};
  }

  // ---------------------------------------------------------------------------------------------
  // Messages to the operator

  function flash(kind, ...content) {
    const box = $("#flash");
    box.replaceChildren(...content.map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))),
      h("button", { type: "button", class: "secondary small", onclick: () => { box.hidden = true; } }, "Dismiss"));
    box.className = "flash " + kind;
    box.hidden = false;
  }

  function errorNodes(error, what) {
    const nodes = [what ? `${what} refused: ` : ""];
    if (error.reason) nodes.push(h("span", { class: "reason", id: "flash-reason", dataset: { reason: error.reason } }, error.reason));
    else nodes.push(h("span", { class: "reason", id: "flash-reason", dataset: { reason: error.code } }, error.code));
    nodes.push(` (${error.code}) — ${error.message}`);
    const extra = Object.entries(error.metadata || {}).map(([k, v]) => `${k}=${v}`).join(", ");
    if (extra) nodes.push(h("span", { class: "muted" }, ` [${extra}]`));
    return nodes;
  }

  function showError(error, what) { flash("error", ...errorNodes(error, what)); }

  function inlineError(error) { return h("p", { class: "error-text" }, errorNodes(error)); }

  // ---------------------------------------------------------------------------------------------
  // Confirmation dialog: every action goes through it

  function confirmAction({ title, text, fields = [], callText, okText = "Confirm", danger = false }) {
    const dialog = $("#confirm-dialog");
    $("#confirm-title").textContent = title;
    $("#confirm-text").textContent = text;
    $("#confirm-call").textContent = callText ? "Calls " + callText + " with the admin token." : "";
    const holder = $("#confirm-fields");
    holder.replaceChildren(...fields.map((field) => h("label", { class: "field" }, field.label, field.element)));
    const ok = $("#confirm-ok");
    ok.textContent = okText;
    ok.className = danger ? "danger" : "";
    return new Promise((resolve) => {
      const done = (value) => {
        ok.removeEventListener("click", onOk);
        $("#confirm-cancel").removeEventListener("click", onCancel);
        dialog.removeEventListener("cancel", onCancel);
        if (dialog.open) dialog.close();
        resolve(value);
      };
      const onOk = (event) => { event.preventDefault(); done(true); };
      const onCancel = (event) => { event.preventDefault(); done(false); };
      ok.addEventListener("click", onOk);
      $("#confirm-cancel").addEventListener("click", onCancel);
      dialog.addEventListener("cancel", onCancel);
      dialog.showModal();
      (fields[0] && fields[0].element || ok).focus();
    });
  }

  /// Runs an action after confirmation; shows its outcome; returns true when it succeeded.
  async function act(confirmation, run, success) {
    if (!(await confirmAction(confirmation))) return false;
    try {
      await run();
      flash("info", success);
      return true;
    } catch (error) {
      showError(error, confirmation.title);
      return false;
    }
  }

  const durationChoices = [["600", "10 minutes"], ["3600", "1 hour"], ["86400", "1 day"], ["604800", "7 days"], ["2592000", "30 days"]];

  function select(id, options, value) {
    return h("select", { id }, options.map(([v, label]) => h("option", { value: v, selected: v === value }, label)));
  }

  // ---------------------------------------------------------------------------------------------
  // Routing: #/ (find a group), #/group/<id>, #/user/<id>, #/tail

  function parseRoute() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, query] = hash.split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    return { name: parts[0] || "groups", arg: parts[1] || "", params: new URLSearchParams(query || "") };
  }

  let routeGeneration = 0;

  async function route() {
    const generation = ++routeGeneration;
    performance.mark("console:route");
    if (!token) {
      pendingRoute = location.hash;
      return renderLogin();
    }
    const current = parseRoute();
    for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.nav === current.name || (current.name === "group" && link.dataset.nav === "groups"));
    const view = $("#view");
    const stillCurrent = () => generation === routeGeneration;
    switch (current.name) {
      case "group": return renderGroup(view, current.arg, stillCurrent);
      case "user": return renderUser(view, current.arg, stillCurrent);
      case "tail": return renderTail(view);
      default: return renderSearch(view, current.params, stillCurrent);
    }
  }

  const go = (hash) => { if (location.hash === hash) route(); else location.hash = hash; };

  // ---------------------------------------------------------------------------------------------
  // Sign in

  function decodeClaims(jwt) {
    try {
      const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      return JSON.parse(atob(part + "=".repeat((4 - part.length % 4) % 4)));
    } catch {
      return null;
    }
  }

  function renderLogin(message) {
    for (const id of ["nav", "stats", "who"]) $("#" + id).hidden = true;
    const input = h("textarea", { id: "login-token", placeholder: "eyJhbGciOi…", autocomplete: "off", spellcheck: "false" });
    const status = h("p", { id: "login-status" }, message || "");
    const form = h("form", { id: "login-form", onsubmit: async (event) => {
      event.preventDefault();
      const candidate = input.value.trim();
      if (!candidate) return;
      const payload = decodeClaims(candidate);
      status.replaceChildren("Checking the token…");
      token = candidate;
      try {
        // Any authenticated call checks the token: reading one group is the cheapest.
        await call("GroupService", "GetGroupsInfo", { groupIds: ["console-token-check"] });
      } catch (error) {
        token = null;
        status.replaceChildren(inlineError(error));
        return;
      }
      claims = payload || {};
      input.value = "";
      signedIn();
    } },
    h("label", { class: "field", for: "login-token" }, "Admin token (a JWT with role admin, e.g. from `groupd token --admin`)", input),
    h("div", { class: "toolbar" }, h("button", { type: "submit", id: "login-submit" }, "Sign in")));
    $("#view").replaceChildren(h("section", { class: "card login" },
      h("h1", {}, "Sign in"),
      h("p", {}, "Paste an admin token of the app to look after. It stays in this tab's memory only: reloading or closing the tab signs you out."),
      form, status));
    input.focus();
  }

  function signedIn() {
    for (const id of ["nav", "stats", "who"]) $("#" + id).hidden = false;
    const role = claims.role ? `role ${claims.role}` : "";
    $("#who-text").textContent = `app ${claims.app || "?"} · ${claims.sub || "?"}${role ? " · " + role : ""}`;
    if (claims.role && claims.role !== "admin") {
      flash("error", "This is a user token: the console acts with its permissions only. Use an admin token to look after the app.");
    }
    const target = pendingRoute && pendingRoute !== "#" ? pendingRoute : "#/";
    pendingRoute = null;
    go(target);
  }

  function signOut() {
    token = null;
    claims = null;
    stopTail();
    tail.rows = [];
    $("#flash").hidden = true;
    location.hash = "#/";
    renderLogin("Signed out.");
  }

  // ---------------------------------------------------------------------------------------------
  // Find a group: SearchGroups by id prefix and name; by member name card as a user

  async function renderSearch(view, params, stillCurrent) {
    const keyword = params.get("q") || "";
    const by = params.get("by") || "both";
    const asUser = params.get("as") || "";
    const keywordInput = h("input", { id: "search-keyword", value: keyword, placeholder: "group id prefix or name", size: 32, required: true });
    const bySelect = select("search-by", [["both", "id prefix or name"], ["id", "id prefix only"], ["name", "name only"],
      ["card", "member name card (as a user)"]], by);
    const userInput = h("input", { id: "search-as", value: asUser, placeholder: "user id (name card search)", size: 22 });
    const results = h("div", { id: "search-area" });
    view.replaceChildren(
      h("h1", {}, "Find a group"),
      h("p", { class: "sub" }, "Searches the app's groups by id prefix and name (SearchGroups). A name card search runs as a user, over the groups they joined."),
      h("section", { class: "card" },
        h("form", { class: "inline", id: "search-form", onsubmit: (event) => {
          event.preventDefault();
          const q = new URLSearchParams({ q: keywordInput.value.trim(), by: bySelect.value });
          if (bySelect.value === "card" && userInput.value.trim()) q.set("as", userInput.value.trim());
          go("#/?" + q.toString());
        } },
        h("label", { class: "field" }, "Keyword", keywordInput),
        h("label", { class: "field" }, "Match", bySelect),
        h("label", { class: "field" }, "As user", userInput),
        h("button", { type: "submit", id: "search-submit" }, "Search"),
        h("button", { type: "button", class: "secondary", id: "search-open", onclick: () => {
          if (keywordInput.value.trim()) go("#/group/" + encodeURIComponent(keywordInput.value.trim()));
        } }, "Open id"))),
      h("section", { class: "card" }, results));
    keywordInput.focus();
    if (!keyword) {
      results.replaceChildren(h("p", { class: "empty" }, "Type part of a group's id or name."));
      return;
    }
    const fields = { both: [], id: ["SEARCH_FIELD_GROUP_ID"], name: ["SEARCH_FIELD_NAME"], card: ["SEARCH_FIELD_MEMBER_NAME_CARD"] }[by] || [];
    const tbody = [];
    let nextToken = "";
    const more = h("button", { type: "button", class: "secondary", id: "search-more", hidden: true, onclick: () => load() }, "More results");
    const area = h("div", {});
    results.replaceChildren(area, h("div", { class: "pager" }, more));
    async function load() {
      try {
        const response = await call("GroupService", "SearchGroups",
          { keyword, fields, pageSize: 50, pageToken: nextToken }, { operator: by === "card" ? asUser : undefined });
        if (!stillCurrent()) return;
        for (const result of response.results || []) {
          const group = result.group || {};
          const link = h("a", { href: "#/group/" + encodeURIComponent(group.groupId), class: "group-link", dataset: { group: group.groupId } }, group.groupId);
          tbody.push(h("tr", { dataset: { group: group.groupId } },
            h("td", { class: "mono" }, link),
            h("td", {}, (group.profile || {}).name || ""),
            h("td", {}, typeName(group.type)),
            h("td", {}, String(group.memberCount || 0)),
            h("td", { class: "mono" }, group.ownerUserId || "—"),
            h("td", {}, (result.matchedFields || []).map((f) => words(strip(f, "SEARCH_FIELD_"))).join(", "),
              (result.matchedMembers || []).length ? h("div", { class: "muted" }, "cards: " + result.matchedMembers.map((m) => m.nameCard).join(", ")) : null)));
        }
        nextToken = response.nextPageToken || "";
        area.replaceChildren(table("search-results", ["Group id", "Name", "Type", "Members", "Owner", "Matched"], tbody, "No group matches."));
        more.hidden = !nextToken;
      } catch (error) {
        area.replaceChildren(inlineError(error));
      }
    }
    await load();
  }

  // ---------------------------------------------------------------------------------------------
  // A group's page

  const settingRows = [
    ["joinOption", "Who may join", (v) => words(strip(v, "JOIN_OPTION_")) + ({ JOIN_OPTION_ANY: " (joins at once)", JOIN_OPTION_APPROVAL: " (an approver decides)", JOIN_OPTION_FORBIDDEN: " (invitation only)" }[v] || "")],
    ["approverScope", "Who approves applications", (v) => ({ APPROVER_SCOPE_OWNER: "The owner", APPROVER_SCOPE_OWNER_AND_ADMINS: "The owner and admins" })[v] || words(v)],
    ["inviteScope", "Who may invite", scopeName],
    ["inviteeConsent", "Invitee must consent", (v) => words(strip(v, "REQUIREMENT_"))],
    ["inviteApproval", "Invitations need approval", (v) => words(strip(v, "REQUIREMENT_"))],
    ["removeScope", "Who may remove (kick, ban) members", scopeName],
    ["muteScope", "Who may mute", scopeName],
    ["profileEditScope", "Who may edit the profile", scopeName],
    ["memberEditScope", "Who may edit member cards", (v) => words(strip(v, "MEMBER_EDIT_SCOPE_"))],
    ["settingsEditScope", "Who may change these settings", scopeName],
    ["ownerQuit", "When the owner quits", (v) => words(strip(v, "OWNER_QUIT_RULE_"))],
    ["mentionAllScope", "Who may @all", scopeName],
    ["inviteLinkScope", "Who may create invite links", scopeName],
    ["pinScope", "Who may pin messages", scopeName],
    ["slowModeIntervalSeconds", "Slow mode", (v) => v ? `${v} s between messages` : "Off"],
  ];

  async function renderGroup(view, groupID, stillCurrent) {
    if (!groupID) return go("#/");
    const sections = {
      summary: h("section", { class: "card", id: "group-summary" }, h("p", { class: "empty" }, "Loading…")),
      members: h("section", { class: "card", id: "members-card" }, h("h2", {}, "Members"), h("p", { class: "empty" }, "Loading…")),
      applications: h("section", { class: "card", id: "applications-card" }, h("h2", {}, "Pending applications and invitations")),
      bans: h("section", { class: "card", id: "bans-card" }, h("h2", {}, "Bans")),
      settings: h("section", { class: "card", id: "settings-card" }, h("h2", {}, "Settings")),
      profile: h("section", { class: "card", id: "profile-card" }, h("h2", {}, "Profile")),
      pins: h("section", { class: "card", id: "pins-card" }, h("h2", {}, "Pinned messages")),
      links: h("section", { class: "card", id: "links-card" }, h("h2", {}, "Invite links")),
      attributes: h("section", { class: "card", id: "attributes-card" }, h("h2", {}, "Attributes and counters")),
    };
    view.replaceChildren(
      h("p", { class: "muted" }, h("a", { href: "#/" }, "← Find a group")),
      sections.summary, sections.members,
      h("div", { class: "grid2" }, sections.applications, sections.bans),
      h("div", { class: "grid2" }, sections.profile, sections.settings),
      h("div", { class: "grid2" }, sections.pins, sections.links),
      sections.attributes);
    // After an action: the parts it may have changed, the member table staying on its page.
    let members;
    const reload = () => {
      if (!stillCurrent()) return;
      members.load(members.tokens[members.page]);
      loadGroupInfo(sections, groupID, stillCurrent, reload);
      loadApplications(sections.applications, groupID, stillCurrent, reload);
    };
    members = new MemberList(sections.members, groupID, stillCurrent, reload);
    // Every part at once; the member table first on screen.
    await Promise.all([
      members.load(""),
      loadGroupInfo(sections, groupID, stillCurrent, reload),
      loadApplications(sections.applications, groupID, stillCurrent, reload),
      loadBans(sections.bans, groupID, stillCurrent),
      loadLinks(sections.links, groupID, stillCurrent),
      loadAttributes(sections.attributes, groupID, stillCurrent),
    ]);
  }

  async function loadGroupInfo(sections, groupID, stillCurrent, reload) {
    let group;
    try {
      const response = await call("GroupService", "GetGroupsInfo", { groupIds: [groupID] });
      if (!stillCurrent()) return;
      group = (response.groups || [])[0];
      if (!group) {
        const failure = (response.failures || [])[0] || {};
        sections.summary.replaceChildren(h("h1", {}, groupID), h("p", { class: "error-text", id: "group-missing" },
          "Not found: ", h("span", { class: "reason" }, failure.reason || "GROUP_NOT_FOUND")));
        return;
      }
    } catch (error) {
      sections.summary.replaceChildren(h("h1", {}, groupID), inlineError(error));
      return;
    }
    const profile = group.profile || {};
    const mute = group.mute;
    sections.summary.replaceChildren(
      h("div", { class: "toolbar" },
        h("h1", { id: "group-name" }, profile.name || groupID),
        badge(typeName(group.type)),
        mute ? badge("group muted: " + words(strip(mute.mode, "GROUP_MUTE_MODE_")) + (mute.muteUntil ? " until " + time(mute.muteUntil) : ""), "muted") : null,
        h("div", { class: "spacer" }),
        h("button", { type: "button", class: "secondary", id: "transfer-owner", onclick: () => transferOwnership(group, reload) }, "Transfer ownership"),
        h("button", { type: "button", class: "danger", id: "dismiss-group", onclick: () => dismissGroup(group) }, "Dismiss group")),
      kv([
        ["Group id", h("code", { id: "group-id" }, group.groupId)],
        ["Owner", group.ownerUserId ? h("a", { href: "#/user/" + encodeURIComponent(group.ownerUserId), class: "mono" }, group.ownerUserId) : "— (ownerless)"],
        ["Members", h("span", { id: "group-member-count" }, `${group.memberCount || 0} of at most ${group.maxMemberCount || "?"}`)],
        ["Created", time(group.createTime)],
        ["Last message", time(group.lastMessageTime)],
        ["Latest sequence", group.latestSequence || "0"],
        (group.muteBypassUserIds || []).length ? ["Mute bypass", group.muteBypassUserIds.join(", ")] : null,
      ]));
    sections.profile.replaceChildren(h("h2", {}, "Profile"), kv([
      ["Name", profile.name || "—"],
      ["Introduction", profile.introduction || "—"],
      ["Notification", profile.notification || "—"],
      ["Face URL", profile.faceUrl || "—"],
      ...Object.entries(group.custom || {}).map(([key, value]) => ["custom." + key, bytesText(value)]),
      ["Profile changed", time(group.lastInfoTime)],
    ]));
    const settings = group.settings || {};
    sections.settings.replaceChildren(h("h2", {}, "Settings: who may do what"),
      table("settings-table", ["Setting", "Value"], settingRows.filter(([key]) => key in settings || key === "slowModeIntervalSeconds")
        .map(([key, label, show]) => h("tr", {}, h("td", {}, label), h("td", { dataset: { setting: key } }, show(settings[key]))))),
      h("p", { class: "muted" }, "The admin token passes every check; these rules bind the members. Change them with UpdateGroupSettings."));
    const pins = group.pinnedMessages || [];
    sections.pins.replaceChildren(h("h2", {}, "Pinned messages"),
      table("pins-table", ["Sequence", "Pinned by", "When"], pins.map((pin) =>
        h("tr", {}, h("td", { class: "mono" }, pin.sequence || "0"), h("td", { class: "mono" }, pin.pinnedByUserId || "backend"), h("td", {}, time(pin.pinTime)))),
      "No pinned message."));
  }

  class MemberList {
    constructor(card, groupID, stillCurrent, reload) {
      Object.assign(this, { card, groupID, stillCurrent, reload });
      this.tokens = [""];      // the page token of each page seen, page 1 first
      this.page = 0;
      this.search = { keyword: "", by: "MEMBER_SEARCH_FIELD_USER_ID_PREFIX" };
    }

    async load(pageToken) {
      const started = performance.now();
      let response;
      try {
        response = this.search.keyword
          ? await call("MemberService", "SearchMembers", { groupId: this.groupID, keyword: this.search.keyword, by: this.search.by, pageSize: 50, pageToken })
          : await call("MemberService", "ListMembers", { groupId: this.groupID, pageSize: 50, pageToken });
      } catch (error) {
        if (!this.stillCurrent()) return;
        this.card.replaceChildren(h("h2", {}, "Members"), this.searchForm(), inlineError(error));
        return;
      }
      if (!this.stillCurrent()) return;
      if (response.memberCount !== undefined) this.total = response.memberCount;
      this.render(response.members || [], response.nextPageToken || "");
      if (this.page === 0 && !this.measured) {
        this.measured = true;
        // From the route's start to the first page on screen (docs/CONSOLE.md).
        performance.measure("console:group-first-page", "console:route");
      }
      this.card.dataset.loadMs = String(Math.round(performance.now() - started));
    }

    searchForm() {
      const keyword = h("input", { id: "member-search", value: this.search.keyword, placeholder: "user id prefix or name card", size: 26 });
      const by = select("member-search-by", [["MEMBER_SEARCH_FIELD_USER_ID_PREFIX", "user id prefix"], ["MEMBER_SEARCH_FIELD_NAME_CARD", "name card"]], this.search.by);
      return h("form", { class: "inline", onsubmit: (event) => {
        event.preventDefault();
        this.search = { keyword: keyword.value.trim(), by: by.value };
        this.tokens = [""];
        this.page = 0;
        this.load("");
      } }, keyword, by, h("button", { type: "submit", class: "secondary" }, "Search members"),
      this.search.keyword ? h("button", { type: "button", class: "secondary", onclick: () => {
        this.search.keyword = ""; this.tokens = [""]; this.page = 0; this.load("");
      } }, "Show all") : null);
    }

    render(members, next) {
      const first = this.page * 50 + 1;
      const rows = members.map((member) => this.row(member));
      const prev = h("button", { type: "button", class: "secondary", id: "members-prev", disabled: this.page === 0, onclick: () => {
        this.page -= 1; this.load(this.tokens[this.page]);
      } }, "← Previous");
      const nextButton = h("button", { type: "button", class: "secondary", id: "members-next", disabled: !next, onclick: () => {
        this.page += 1; this.tokens[this.page] = next; this.load(next);
      } }, "Next →");
      const info = members.length
        ? `Page ${this.page + 1} · members ${first}–${first + members.length - 1}${this.total !== undefined && !this.search.keyword ? " of " + this.total : ""}`
        : "No member on this page.";
      this.card.replaceChildren(
        h("div", { class: "toolbar" }, h("h2", {}, this.search.keyword ? `Members matching “${this.search.keyword}”` : "Members"), h("div", { class: "spacer" }), this.searchForm()),
        table("members-table", ["User id", "Name card", "Role", "Joined", "Mute", ""], rows, "No member."),
        h("div", { class: "pager" }, prev, nextButton, h("span", { class: "info", id: "members-page-info", dataset: { page: String(this.page + 1) } }, info)));
    }

    row(member) {
      const user = member.userId;
      const role = member.role || "MEMBER_ROLE_MEMBER";
      const muted = isMuted(member);
      const reload = () => this.load(this.tokens[this.page]);
      const actions = [];
      if (role !== "MEMBER_ROLE_OWNER") {
        actions.push(muted
          ? h("button", { type: "button", class: "small secondary", dataset: { action: "unmute", user }, onclick: () => unmute(this.groupID, user, reload) }, "Unmute")
          : h("button", { type: "button", class: "small secondary", dataset: { action: "mute", user }, onclick: () => mute(this.groupID, user, reload) }, "Mute"));
        actions.push(h("button", { type: "button", class: "small secondary", dataset: { action: "role", user }, onclick: () => setRole(this.groupID, member, reload) }, "Set role"));
        actions.push(h("button", { type: "button", class: "small danger", dataset: { action: "kick", user }, onclick: () => kick(this.groupID, user, this.reload) }, "Kick"));
      }
      return h("tr", { dataset: { user, role, muted: muted ? "yes" : "no" } },
        h("td", { class: "mono" }, h("a", { href: "#/user/" + encodeURIComponent(user) }, user)),
        h("td", {}, member.nameCard || ""),
        h("td", {}, role === "MEMBER_ROLE_OWNER" ? badge("Owner", "owner") : role === "MEMBER_ROLE_ADMIN" ? badge("Admin", "admin") : "Member"),
        h("td", {}, time(member.joinTime)),
        h("td", { class: "mute-cell" }, muted ? badge("muted until " + time(member.muteUntil), "muted") : "—"),
        h("td", { class: "actions" }, actions));
    }
  }

  async function mute(groupID, user, reload) {
    const duration = select("confirm-duration", durationChoices, "3600");
    const ok = await act({
      title: "Mute member", text: `Mute ${user} in ${groupID}? They cannot send messages until the mute ends.`,
      fields: [{ label: "For", element: duration }], callText: "MemberService/MuteMembers", okText: "Mute",
    }, async () => {
      const response = await call("MemberService", "MuteMembers", { groupId: groupID, userIds: [user], durationSeconds: Number(duration.value) });
      memberResultOrThrow(response.results);
    }, `${user} is muted.`);
    if (ok) reload();
  }

  async function unmute(groupID, user, reload) {
    const ok = await act({ title: "Unmute member", text: `Lift ${user}'s mute in ${groupID}?`, callText: "MemberService/MuteMembers (0 seconds)", okText: "Unmute" },
      async () => {
        const response = await call("MemberService", "MuteMembers", { groupId: groupID, userIds: [user], durationSeconds: 0 });
        memberResultOrThrow(response.results);
      }, `${user} is no longer muted.`);
    if (ok) reload();
  }

  async function setRole(groupID, member, reload) {
    const role = select("confirm-role", [["MEMBER_ROLE_ADMIN", "Admin"], ["MEMBER_ROLE_MEMBER", "Member"]],
      member.role === "MEMBER_ROLE_ADMIN" ? "MEMBER_ROLE_MEMBER" : "MEMBER_ROLE_ADMIN");
    const ok = await act({ title: "Set role", text: `Change ${member.userId}'s role in ${groupID}.`, fields: [{ label: "New role", element: role }],
      callText: "MemberService/SetMemberRole", okText: "Set role" },
    () => call("MemberService", "SetMemberRole", { groupId: groupID, userId: member.userId, role: role.value }),
    `${member.userId} is now ${roleName(role.value).toLowerCase()}.`);
    if (ok) reload();
  }

  async function kick(groupID, user, reload) {
    const reason = h("input", { id: "confirm-reason", maxlength: 100, placeholder: "shown to the member (optional)" });
    const ban = h("input", { type: "checkbox", id: "confirm-ban" });
    const ok = await act({ title: "Kick member", text: `Remove ${user} from ${groupID}?`, danger: true, okText: "Kick",
      fields: [{ label: "Reason", element: reason }, { label: h("span", {}, ban, " also ban them (until lifted)"), element: h("span") }],
      callText: "MemberService/KickMembers" },
    async () => {
      const response = await call("MemberService", "KickMembers", { groupId: groupID, userIds: [user], reason: reason.value, ban: ban.checked });
      memberResultOrThrow(response.results);
    }, `${user} was removed.`);
    if (ok) reload();
  }

  async function transferOwnership(group, reload) {
    const owner = h("input", { id: "confirm-new-owner", placeholder: "a member's user id" });
    const ok = await act({ title: "Transfer ownership", text: `Make another member the owner of ${group.groupId} (now ${group.ownerUserId || "nobody"}). The old owner becomes a member.`,
      fields: [{ label: "New owner", element: owner }], callText: "GroupService/TransferOwnership", okText: "Transfer" },
    () => call("GroupService", "TransferOwnership", { groupId: group.groupId, newOwnerUserId: owner.value.trim() }),
    `${owner.value.trim()} owns ${group.groupId} now.`);
    if (ok) reload();
  }

  async function dismissGroup(group) {
    const ok = await act({ title: "Dismiss group", danger: true, okText: "Dismiss",
      text: `Dismiss ${group.groupId} (${(group.profile || {}).name || ""}, ${group.memberCount || 0} members)? Every member is told; this cannot be undone.`,
      callText: "GroupService/DismissGroup" },
    () => call("GroupService", "DismissGroup", { groupId: group.groupId }), `${group.groupId} was dismissed.`);
    if (ok) go("#/");
  }

  /// A batch call answers per user: a result other than SUCCESS is this action's refusal.
  function memberResultOrThrow(results) {
    const result = (results || [])[0];
    if (result && result.result !== "MEMBER_RESULT_CODE_SUCCESS") {
      throw new ApiError(words(strip(result.result, "MEMBER_RESULT_CODE_")), `the call succeeded but ${result.userId}'s result is ${result.result}`,
        result.reason || strip(result.result, "MEMBER_RESULT_CODE_"));
    }
  }

  async function loadApplications(card, groupID, stillCurrent, reload) {
    let response;
    try {
      response = await call("ApplicationService", "ListApplications", { groupId: groupID, states: ["APPLICATION_STATE_PENDING"], pageSize: 100 });
    } catch (error) {
      if (stillCurrent()) card.replaceChildren(h("h2", {}, "Pending applications and invitations"), inlineError(error));
      return;
    }
    if (!stillCurrent()) return;
    const rows = (response.applications || []).map((item) => {
      const id = item.applicationId;
      const join = item.kind === "APPLICATION_KIND_JOIN";
      const who = join ? item.applicantUserId : `${item.inviteeUserId} (invited by ${item.inviterUserId || "backend"})`;
      return h("tr", { dataset: { application: id } },
        h("td", {}, join ? "Join request" : "Invitation"),
        h("td", { class: "mono" }, who || "—"),
        h("td", {}, item.message || ""),
        h("td", {}, time(item.createTime)),
        h("td", { class: "actions" },
          h("button", { type: "button", class: "small", dataset: { action: "accept", application: id }, onclick: () => decide(true, item, reload) }, "Accept"),
          h("button", { type: "button", class: "small danger", dataset: { action: "refuse", application: id }, onclick: () => decide(false, item, reload) }, "Refuse")));
    });
    card.replaceChildren(h("h2", {}, "Pending applications and invitations"),
      table("applications-table", ["Kind", "Who", "Message", "Sent", ""], rows, "Nothing pending."));
  }

  async function decide(accept, item, reload) {
    const message = h("input", { id: "confirm-message", maxlength: 100, placeholder: "to the applicant (optional)" });
    const who = item.applicantUserId || item.inviteeUserId;
    await act({ title: accept ? "Accept application" : "Refuse application", danger: !accept, okText: accept ? "Accept" : "Refuse",
      text: `${accept ? "Accept" : "Refuse"} ${who}'s ${item.kind === "APPLICATION_KIND_JOIN" ? "request to join" : "invitation to"} ${item.groupId}?`,
      fields: [{ label: "Message", element: message }],
      callText: `ApplicationService/${accept ? "AcceptApplication" : "RefuseApplication"}` },
    () => call("ApplicationService", accept ? "AcceptApplication" : "RefuseApplication", { applicationId: item.applicationId, message: message.value }),
    `${who}'s application was ${accept ? "accepted" : "refused"}.`);
    // Reloaded either way: a refusal may mean someone else handled it meanwhile.
    reload();
  }

  async function loadBans(card, groupID, stillCurrent) {
    try {
      const response = await call("MemberService", "ListBannedMembers", { groupId: groupID });
      if (!stillCurrent()) return;
      card.replaceChildren(h("h2", {}, "Bans"), table("bans-table", ["User", "Until", "Reason", "By"], (response.bans || []).map((ban) =>
        h("tr", {}, h("td", { class: "mono" }, ban.userId), h("td", {}, ban.until ? time(ban.until) : "until lifted"),
          h("td", {}, ban.reason || ""), h("td", { class: "mono" }, ban.operatorUserId || "backend"))), "Nobody is banned."),
      response.nextPageToken ? h("p", { class: "muted" }, "More bans than shown (first page).") : null);
    } catch (error) {
      if (stillCurrent()) card.replaceChildren(h("h2", {}, "Bans"), inlineError(error));
    }
  }

  async function loadLinks(card, groupID, stillCurrent) {
    try {
      const response = await call("MemberService", "ListInviteLinks", { groupId: groupID });
      if (!stillCurrent()) return;
      card.replaceChildren(h("h2", {}, "Invite links"), table("links-table", ["Link id", "Creator", "Created", "Expires", "Uses", "Approval"],
        (response.links || []).map((link) => h("tr", {}, h("td", { class: "mono" }, link.linkId), h("td", { class: "mono" }, link.creatorUserId || "backend"),
          h("td", {}, time(link.createTime)), h("td", {}, link.expireTime ? time(link.expireTime) : "never"),
          h("td", {}, `${link.useCount || 0} of ${link.maxUses ? link.maxUses : "∞"}`), h("td", {}, link.requireApproval ? "required" : "no"))),
        "No live invite link."));
    } catch (error) {
      // AVChatRooms have no links: the reason says so.
      if (stillCurrent()) card.replaceChildren(h("h2", {}, "Invite links"), inlineError(error));
    }
  }

  async function loadAttributes(card, groupID, stillCurrent) {
    const [attributes, counters] = await Promise.allSettled([
      call("GroupService", "GetGroupAttributes", { groupId: groupID }),
      call("GroupService", "GetGroupCounters", { groupId: groupID }),
    ]);
    if (!stillCurrent()) return;
    const attributePart = attributes.status === "fulfilled"
      ? table("attributes-table", ["Key", "Value", "Version"], (attributes.value.attributes || []).map((a) =>
        h("tr", {}, h("td", { class: "mono" }, a.key), h("td", {}, bytesText(a.value)), h("td", {}, a.version || "0"))), "No attribute.")
      : inlineError(attributes.reason);
    const counterPart = counters.status === "fulfilled"
      ? table("counters-table", ["Counter", "Value"], Object.entries(counters.value.values || {}).map(([key, value]) =>
        h("tr", {}, h("td", { class: "mono" }, key), h("td", {}, String(value)))), "No counter.")
      : inlineError(counters.reason);
    card.replaceChildren(h("h2", {}, "Attributes and counters"), h("div", { class: "grid2" }, h("div", {}, attributePart), h("div", {}, counterPart)));
  }

  // ---------------------------------------------------------------------------------------------
  // A user's page: ListJoinedGroups as that user (x-operator-id)

  async function renderUser(view, userID, stillCurrent) {
    const input = h("input", { id: "user-id", value: userID, placeholder: "user id", size: 30 });
    const area = h("div", { id: "user-area" });
    view.replaceChildren(h("h1", {}, userID ? `User ${userID}` : "Users"),
      h("p", { class: "sub" }, "A user's joined groups, read as that user (ListJoinedGroups with x-operator-id; AVChatRooms are never listed)."),
      h("section", { class: "card" }, h("form", { class: "inline", onsubmit: (event) => {
        event.preventDefault();
        if (input.value.trim()) go("#/user/" + encodeURIComponent(input.value.trim()));
      } }, h("label", { class: "field" }, "User id", input), h("button", { type: "submit", id: "user-submit" }, "Show"))),
      h("section", { class: "card" }, area));
    if (!userID) { input.focus(); return; }
    const rows = [];
    let next = "";
    let total;
    const more = h("button", { type: "button", class: "secondary", hidden: true, onclick: () => load() }, "More groups");
    const listing = h("div", {});
    area.replaceChildren(h("h2", {}, "Joined groups"), listing, h("div", { class: "pager" }, more));
    async function load() {
      try {
        const response = await call("GroupService", "ListJoinedGroups", { pageSize: 100, pageToken: next }, { operator: userID });
        if (!stillCurrent()) return;
        total = response.totalCount || 0;
        for (const group of response.groups || []) {
          const self = group.selfInfo || {};
          rows.push(h("tr", { dataset: { group: group.groupId } },
            h("td", { class: "mono" }, h("a", { href: "#/group/" + encodeURIComponent(group.groupId), class: "group-link" }, group.groupId)),
            h("td", {}, (group.profile || {}).name || ""),
            h("td", {}, typeName(group.type)),
            h("td", {}, roleName(self.role)),
            h("td", {}, time(self.joinTime)),
            h("td", {}, isMuted(self) ? badge("muted until " + time(self.muteUntil), "muted") : "—"),
            h("td", {}, String(group.unreadCount || 0))));
        }
        next = response.nextPageToken || "";
        listing.replaceChildren(h("p", { class: "muted" }, `${total} group(s).`),
          table("joined-table", ["Group id", "Name", "Type", "Role", "Joined", "Mute", "Unread"], rows, "Not in any group."));
        more.hidden = !next;
      } catch (error) {
        listing.replaceChildren(inlineError(error));
      }
    }
    await load();
  }

  // ---------------------------------------------------------------------------------------------
  // The live event tail: EventService/Subscribe as a Connect server stream (the admin token
  // without x-operator-id: every event of the app), read with fetch() and a stream reader.

  const tail = { controller: null, rows: [], status: "stopped", detail: "", cursor: "", groups: "", kinds: [], messages: false,
    paused: false, received: [] };
  const MAX_TAIL_ROWS = 500;

  function envelope(json) {
    const bytes = new TextEncoder().encode(JSON.stringify(json));
    const framed = new Uint8Array(5 + bytes.length);
    new DataView(framed.buffer).setUint32(1, bytes.length);
    framed.set(bytes, 5);
    return framed;
  }

  async function startTail(resume) {
    stopTail();
    const controller = new AbortController();
    tail.controller = controller;
    setTailStatus("connecting", "");
    const request = {
      groupIds: tail.groups.split(/[\s,]+/).filter(Boolean),
      kinds: tail.kinds,
      excludeMessages: !tail.messages,
    };
    if (resume && tail.cursor) request.cursor = tail.cursor;
    let response;
    try {
      response = await fetch("/groupd.v1.EventService/Subscribe", {
        method: "POST", headers: headers("application/connect+json"), body: envelope(request), signal: controller.signal,
        credentials: "omit", cache: "no-store",
      });
    } catch (error) {
      if (tail.controller === controller) setTailStatus("ended", "cannot reach groupd: " + error.message);
      return;
    }
    if (!response.ok) {
      const text = await response.text();
      let json = null;
      try { json = JSON.parse(text); } catch { /* reported as text */ }
      const error = ApiError.from(response.status, json, text);
      record(error.reason || error.code);
      if (tail.controller === controller) setTailStatus("ended", `${error.reason || error.code}: ${error.message}`);
      return;
    }
    record(null);
    setTailStatus("connecting", "catching up");
    const reader = response.body.getReader();
    let buffer = new Uint8Array(0);
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        // A stream replaced (new filters) or stopped: what it still had is not shown.
        if (tail.controller !== controller) return;
        if (done) break;
        const joined = new Uint8Array(buffer.length + value.length);
        joined.set(buffer);
        joined.set(value, buffer.length);
        buffer = joined;
        while (buffer.length >= 5) {
          const flags = buffer[0];
          const length = new DataView(buffer.buffer, buffer.byteOffset).getUint32(1);
          if (buffer.length < 5 + length) break;
          const message = JSON.parse(decoder.decode(buffer.subarray(5, 5 + length)) || "{}");
          buffer = buffer.slice(5 + length);
          if (flags & 0x02) {
            const error = message.error;
            if (error) {
              const failure = ApiError.from(0, error, "");
              record(failure.reason || failure.code);
              setTailStatus("ended", `${failure.reason || failure.code}: ${failure.message}`);
            } else {
              setTailStatus("ended", "the server ended the stream");
            }
            return;
          }
          tailItem(message);
        }
      }
      if (tail.controller === controller) setTailStatus("ended", "the connection closed");
    } catch (error) {
      if (tail.controller === controller && error.name !== "AbortError") setTailStatus("ended", error.message);
    }
  }

  function stopTail() {
    if (tail.controller) tail.controller.abort();
    tail.controller = null;
    setTailStatus("stopped", "");
  }

  function setTailStatus(status, detail) {
    tail.status = status;
    tail.detail = detail;
    const node = $("#tail-status");
    if (!node) return;
    const text = { connecting: "Connecting…", live: "Live", ended: "Ended", stopped: "Stopped" }[status];
    node.textContent = text + (detail ? " — " + detail : "");
    node.className = "tail-status " + status;
    node.dataset.status = status;
    const toggle = $("#tail-toggle");
    if (toggle) toggle.textContent = status === "live" || status === "connecting" ? "Stop" : "Start";
  }

  function tailItem(item) {
    if (item.cursor) tail.cursor = item.cursor;
    if (item.caughtUp) {
      // Every event committed from here on arrives.
      setTailStatus("live", "");
      return;
    }
    tail.received.push(performance.now());
    const row = item.event ? eventRow(item.event) : item.message ? messageRow(item.message) : null;
    if (!row) return;
    tail.rows.unshift(row);
    if (tail.rows.length > MAX_TAIL_ROWS) tail.rows.length = MAX_TAIL_ROWS;
    const body = $("#tail-table tbody");
    if (body && !tail.paused) {
      body.prepend(row);
      while (body.children.length > MAX_TAIL_ROWS) body.lastChild.remove();
      $("#tail-empty")?.remove();
    }
    const count = $("#tail-count");
    if (count) count.textContent = String(tail.rows.length);
  }

  function eventSummary(event) {
    const detail = event.profileChange ? "changed: " + (event.profileChange.changedFields || []).join(", ")
      : event.settingsChange ? "changed: " + (event.settingsChange.changedFields || []).join(", ")
      : event.memberChange ? (event.memberChange.members || []).map((m) => m.userId + (m.muteUntil && isMuted(m) ? " muted until " + time(m.muteUntil) : "")).join(", ")
      : event.ownerChange ? `${event.ownerChange.previousOwnerUserId || "—"} → ${event.ownerChange.newOwnerUserId}`
      : event.application ? `${words(strip(event.application.kind, "APPLICATION_KIND_"))} ${event.application.applicationId}: ${words(strip(event.application.state, "APPLICATION_STATE_"))}`
      : event.kick ? "reason: " + (event.kick.reason || "—")
      : event.dismissal ? "reason: " + (event.dismissal.reason || "—")
      : event.groupMute ? words(strip(event.groupMute.mode, "GROUP_MUTE_MODE_")) || "lifted"
      : event.ban ? (event.ban.until ? "until " + time(event.ban.until) : "until lifted")
      : "";
    return detail;
  }

  function eventRow(event) {
    const kind = strip(event.kind, "EVENT_KIND_");
    return h("tr", { dataset: { kind, group: event.groupId || "" } },
      h("td", {}, time(event.time)),
      h("td", { class: "mono" }, event.groupId ? h("a", { href: "#/group/" + encodeURIComponent(event.groupId) }, event.groupId) : "—"),
      h("td", {}, badge(kind, "kind")),
      h("td", { class: "mono" }, event.operatorUserId || "backend"),
      h("td", { class: "mono" }, (event.targetUserIds || []).join(", ")),
      h("td", {}, eventSummary(event)));
  }

  function messageRow(message) {
    return h("tr", { dataset: { kind: "MESSAGE", group: message.groupId || "" } },
      h("td", {}, time(message.sendTime)),
      h("td", { class: "mono" }, message.groupId ? h("a", { href: "#/group/" + encodeURIComponent(message.groupId) }, message.groupId) : "—"),
      h("td", {}, badge("MESSAGE", "kind")),
      h("td", { class: "mono" }, message.senderUserId || "backend"),
      h("td", {}, ""),
      h("td", {}, `sequence ${message.sequence || "?"}${message.text ? ": " + message.text.slice(0, 120) : ""}`));
  }

  const eventKinds = ["MEMBER_JOINED", "MEMBER_INVITED", "MEMBER_QUIT", "MEMBER_KICKED", "MEMBER_MUTED", "MEMBER_BANNED", "MEMBER_UNBANNED",
    "ADMIN_SET", "ADMIN_CANCELLED", "OWNER_CHANGED", "GROUP_CREATED", "GROUP_INFO_CHANGED", "GROUP_SETTINGS_CHANGED", "GROUP_MUTED",
    "GROUP_DISMISSED", "GROUP_REVOKED", "APPLICATION_RECEIVED", "APPLICATION_ACCEPTED", "APPLICATION_REFUSED", "APPLICATION_WITHDRAWN",
    "INVITATION_RECEIVED", "INVITATION_ACCEPTED", "INVITATION_REFUSED", "MEMBER_INFO_CHANGED", "MESSAGE_RECALLED", "MESSAGE_EDITED", "MESSAGE_PINNED",
    "MESSAGE_UNPINNED", "MESSAGE_REACTION_ADDED", "MESSAGE_REACTION_REMOVED", "GROUP_ATTRIBUTES_CHANGED", "INVITE_LINK_CREATED", "INVITE_LINK_REVOKED", "TOPIC_CREATED",
    "TOPIC_UPDATED", "TOPIC_DELETED", "PERMISSION_GROUP_CREATED", "PERMISSION_GROUP_UPDATED", "PERMISSION_GROUP_DELETED",
    "MEMBER_PERMISSIONS_CHANGED", "CUSTOM_NOTIFICATION"];

  function renderTail(view) {
    const groups = h("input", { id: "tail-groups", value: tail.groups, placeholder: "every group", size: 30 });
    const kinds = h("select", { id: "tail-kinds", multiple: true, size: 6 },
      eventKinds.map((kind) => h("option", { value: "EVENT_KIND_" + kind, selected: tail.kinds.includes("EVENT_KIND_" + kind) }, kind)));
    const messages = h("input", { type: "checkbox", id: "tail-messages", checked: tail.messages });
    const apply = (event) => {
      event.preventDefault();
      tail.groups = groups.value;
      tail.kinds = [...kinds.selectedOptions].map((o) => o.value);
      tail.messages = messages.checked;
      startTail(false);
    };
    const pause = h("input", { type: "checkbox", id: "tail-pause", checked: tail.paused, onchange: () => {
      tail.paused = pause.checked;
      if (!tail.paused) $("#tail-table tbody")?.replaceChildren(...tail.rows);
    } });
    const rate = h("b", { id: "tail-rate" }, "0.0");
    view.replaceChildren(
      h("h1", {}, "Live events"),
      h("p", { class: "sub" }, "Every event of the app as it is committed (EventService/Subscribe with the admin token), newest first. Filters apply on the server: changing them restarts the stream."),
      h("section", { class: "card" },
        h("form", { class: "inline", id: "tail-form", onsubmit: apply },
          h("label", { class: "field" }, "Groups (ids, comma separated)", groups),
          h("label", { class: "field" }, "Kinds (none selected: all)", kinds),
          h("label", {}, messages, " include messages"),
          h("button", { type: "submit", id: "tail-apply" }, "Apply filters"),
          h("button", { type: "button", class: "secondary", id: "tail-toggle", onclick: () => {
            if (tail.status === "live" || tail.status === "connecting") stopTail(); else startTail(true);
          } }, "Stop"),
          h("button", { type: "button", class: "secondary", id: "tail-clear", onclick: () => {
            tail.rows = []; $("#tail-table tbody")?.replaceChildren(); $("#tail-count").textContent = "0";
          } }, "Clear"),
          h("label", {}, pause, " pause display"))),
      h("section", { class: "card" },
        h("div", { class: "toolbar" },
          h("span", { id: "tail-status", class: "tail-status" }),
          h("div", { class: "spacer" }),
          h("span", { class: "muted" }, "events/s ", rate, " · shown ", h("b", { id: "tail-count" }, String(tail.rows.length)), ` (last ${MAX_TAIL_ROWS} kept)`)),
        h("div", { class: "scroll" },
          h("table", { id: "tail-table" },
            h("thead", {}, h("tr", {}, ["Time", "Group", "Kind", "Operator", "Targets", "Detail"].map((t) => h("th", {}, t)))),
            h("tbody", {}, tail.rows)))));
    setTailStatus(tail.status, tail.detail);
    if (!tail.controller) startTail(true);
  }

  setInterval(() => {
    const now = performance.now();
    while (tail.received.length && tail.received[0] < now - 10000) tail.received.shift();
    const rate = $("#tail-rate");
    if (rate) rate.textContent = (tail.received.length / 10).toFixed(1);
  }, 1000);

  // ---------------------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("#logout").addEventListener("click", signOut);
    window.addEventListener("hashchange", route);
    route();
  });
})();
