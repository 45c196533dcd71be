import GRDB
import GroupStore
import GroupStoreSQL

extension Schema {
    /// The numbered schema migrations. Append new ones (`v2`, `v3`…); never edit a shipped one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1", migrate: Schema.v1)
        migrator.registerMigration("v2", migrate: Schema.v2)
        migrator.registerMigration("v3", migrate: Schema.v3)
        migrator.registerMigration("v4", migrate: Schema.v4)
        migrator.registerMigration("v5", migrate: Schema.v5)
        migrator.registerMigration("v6", migrate: Schema.v6)
        migrator.registerMigration("v7", migrate: Schema.v7)
        migrator.registerMigration("v8", migrate: Schema.v8)
        migrator.registerMigration("v9", migrate: Schema.v9)
        migrator.registerMigration("v10", migrate: Schema.v10)
        migrator.registerMigration("v11", migrate: Schema.v11)
        migrator.registerMigration("v12", migrate: Schema.v12)
        migrator.registerMigration("v13", migrate: Schema.v13)
        migrator.registerMigration("v14", migrate: Schema.v14)
        migrator.registerMigration("v15", migrate: Schema.v15)
        migrator.registerMigration("v16", migrate: Schema.v16)
        migrator.registerMigration("v17", migrate: Schema.v17)
        migrator.registerMigration("v18", migrate: Schema.v18)
        migrator.registerMigration("v19", migrate: Schema.v19)
        migrator.registerMigration("v20", migrate: Schema.v20)
        migrator.registerMigration("v21", migrate: Schema.v21)
        migrator.registerMigration("v22", migrate: Schema.v22)
        migrator.registerMigration("v23", migrate: Schema.v23)
        return migrator
    }
}

/// The SQL of each migration.
enum Schema {
    /// v1: groups, their custom fields, members and theirs, per-user remarks, events, name search.
    ///
    /// - `groups.group_key` is an internal surrogate key; members, custom fields and events
    ///   refer to it. `(app_id, group_id)` is UNIQUE, dismissed groups included, so an id stays
    ///   taken (and its event sequence unambiguous) until the group is purged.
    /// - `member_count` and `latest_seq` are maintained in the same transaction as the rows they
    ///   count, so reading a group costs the same with 10 or 100,000 members.
    /// - `members.join_order` comes from `groups.next_join_order`: a member list pages by
    ///   `(group_key, join_order)` with a stable cursor, and seniority is its order.
    /// - `group_events.event_id` is an app-wide AUTOINCREMENT order for backend firehoses;
    ///   `(group_key, seq)` is the per-group sequence.
    static func v1(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE groups (
                group_key INTEGER PRIMARY KEY,
                app_id TEXT NOT NULL,
                group_id TEXT NOT NULL,
                type TEXT NOT NULL CHECK (type IN ('Work', 'Public', 'Meeting', 'AVChatRoom')),
                name TEXT NOT NULL,
                introduction TEXT NOT NULL DEFAULT '',
                notification TEXT NOT NULL DEFAULT '',
                face_url TEXT NOT NULL DEFAULT '',
                owner_id TEXT,
                max_members INTEGER,
                member_count INTEGER NOT NULL DEFAULT 0,
                join_option TEXT NOT NULL,
                join_approvers TEXT NOT NULL,
                invite_permission TEXT NOT NULL,
                invitee_must_accept INTEGER NOT NULL,
                invitation_needs_approval INTEGER NOT NULL,
                remove_members_permission TEXT NOT NULL,
                edit_profile_permission TEXT NOT NULL,
                edit_member_info_permission TEXT NOT NULL,
                mute_mode TEXT NOT NULL DEFAULT 'none',
                mute_roles TEXT NOT NULL DEFAULT '',
                mute_until INTEGER,
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                latest_seq INTEGER NOT NULL DEFAULT 0,
                next_join_order INTEGER NOT NULL DEFAULT 1,
                dismissed_at INTEGER,
                UNIQUE (app_id, group_id)
            );

            CREATE TABLE group_custom (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                key TEXT NOT NULL,
                value BLOB NOT NULL,
                PRIMARY KEY (group_key, key)
            ) WITHOUT ROWID;

            CREATE TABLE members (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                app_id TEXT NOT NULL,
                role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
                join_order INTEGER NOT NULL,
                join_seq INTEGER NOT NULL DEFAULT 0,
                joined_at INTEGER NOT NULL,
                name_card TEXT NOT NULL DEFAULT '',
                muted_until INTEGER,
                receive_option TEXT NOT NULL DEFAULT 'receive',
                last_read_seq INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (group_key, user_id)
            ) WITHOUT ROWID;
            CREATE UNIQUE INDEX members_by_join_order ON members(group_key, join_order);
            CREATE INDEX members_by_role ON members(group_key, role, join_order);
            CREATE INDEX members_by_user ON members(app_id, user_id, group_key);
            CREATE INDEX members_by_name_card ON members(group_key, name_card) WHERE name_card <> '';

            CREATE TABLE member_custom (
                group_key INTEGER NOT NULL,
                user_id TEXT NOT NULL,
                key TEXT NOT NULL,
                value BLOB NOT NULL,
                PRIMARY KEY (group_key, user_id, key),
                FOREIGN KEY (group_key, user_id) REFERENCES members(group_key, user_id) ON DELETE CASCADE
            ) WITHOUT ROWID;

            CREATE TABLE group_remarks (
                app_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                remark TEXT NOT NULL,
                updated_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id, group_key)
            ) WITHOUT ROWID;
            CREATE INDEX group_remarks_by_group ON group_remarks(group_key);

            CREATE TABLE group_events (
                event_id INTEGER PRIMARY KEY AUTOINCREMENT,
                app_id TEXT NOT NULL,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                group_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                kind TEXT NOT NULL,
                time INTEGER NOT NULL,
                operator_id TEXT,
                targets TEXT NOT NULL DEFAULT '[]',
                changes TEXT NOT NULL DEFAULT '{}',
                recipient_kind TEXT NOT NULL CHECK (recipient_kind IN ('group', 'user', 'approvers')),
                recipient_user TEXT,
                UNIQUE (group_key, seq)
            );
            CREATE INDEX group_events_by_app ON group_events(app_id, event_id);
            CREATE INDEX group_events_by_recipient ON group_events(app_id, recipient_user, event_id)
                WHERE recipient_user IS NOT NULL;
            CREATE INDEX group_events_by_time ON group_events(time);

            CREATE VIRTUAL TABLE group_name_search USING fts5(
                name, content='groups', content_rowid='group_key', tokenize='trigram'
            );
            CREATE TRIGGER groups_search_insert AFTER INSERT ON groups BEGIN
                INSERT INTO group_name_search(rowid, name) VALUES (new.group_key, new.name);
            END;
            CREATE TRIGGER groups_search_delete AFTER DELETE ON groups BEGIN
                INSERT INTO group_name_search(group_name_search, rowid, name)
                    VALUES ('delete', old.group_key, old.name);
            END;
            CREATE TRIGGER groups_search_update AFTER UPDATE OF name ON groups BEGIN
                INSERT INTO group_name_search(group_name_search, rowid, name)
                    VALUES ('delete', old.group_key, old.name);
                INSERT INTO group_name_search(rowid, name) VALUES (new.group_key, new.name);
            END;
            """)
    }

    /// v2: `groups.has_custom` and `members.has_custom`, so that a read skips the custom-field
    /// query when none of the rows it returned has any (the common case).
    ///
    /// - Both are 1 exactly when the row has at least one custom field. Triggers on
    ///   `group_custom` / `member_custom` maintain them in the transaction that changes the
    ///   custom fields, whatever statement does it (`INSERT`, `INSERT OR REPLACE`, upsert,
    ///   `DELETE`, cascades), so no write path can forget them.
    /// - Existing rows are backfilled from the custom tables.
    /// - `ADD COLUMN` with a constant default does not rewrite the tables.
    static func v2(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN has_custom INTEGER NOT NULL DEFAULT 0;
            UPDATE groups SET has_custom = 1
                WHERE group_key IN (SELECT DISTINCT group_key FROM group_custom);
            CREATE TRIGGER group_custom_insert AFTER INSERT ON group_custom BEGIN
                UPDATE groups SET has_custom = 1 WHERE group_key = new.group_key AND has_custom = 0;
            END;
            CREATE TRIGGER group_custom_delete AFTER DELETE ON group_custom BEGIN
                UPDATE groups
                    SET has_custom = EXISTS (SELECT 1 FROM group_custom WHERE group_key = old.group_key)
                    WHERE group_key = old.group_key;
            END;

            ALTER TABLE members ADD COLUMN has_custom INTEGER NOT NULL DEFAULT 0;
            UPDATE members SET has_custom = 1
                WHERE (group_key, user_id) IN (SELECT DISTINCT group_key, user_id FROM member_custom);
            CREATE TRIGGER member_custom_insert AFTER INSERT ON member_custom BEGIN
                UPDATE members SET has_custom = 1
                    WHERE group_key = new.group_key AND user_id = new.user_id AND has_custom = 0;
            END;
            CREATE TRIGGER member_custom_delete AFTER DELETE ON member_custom BEGIN
                UPDATE members
                    SET has_custom = EXISTS (
                        SELECT 1 FROM member_custom WHERE group_key = old.group_key AND user_id = old.user_id)
                    WHERE group_key = old.group_key AND user_id = old.user_id;
            END;
            """)
    }

    /// v3: mutes kept across quit and rejoin, and the joined-groups listing.
    ///
    /// - `retained_mutes`: a user's mute end kept after leaving a group (RongCloud's quit option
    ///   `removeMuteStatus = NO`), handed back when the user rejoins, then deleted. Deleted with
    ///   the group (cascade).
    /// - `members_by_user_joined`: a user's memberships newest join first, for `joinedGroups`,
    ///   paged by `(joined_at, group_key)`.
    static func v3(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE retained_mutes (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                muted_until INTEGER NOT NULL,
                PRIMARY KEY (group_key, user_id)
            ) WITHOUT ROWID;
            CREATE INDEX members_by_user_joined ON members(app_id, user_id, joined_at, group_key);
            """)
    }

    /// v4: join applications and invitations, and each user's read time of them.
    ///
    /// - `applications.app_key` is AUTOINCREMENT, so a listing can remember where it began;
    ///   listings go newest first by `(created_at, app_key)`, which never change (a refreshed
    ///   application keeps its creation time).
    /// - `sender_id` is the applicant or the inviter, `subject_id` the user who joins; at most one
    ///   pending item per group, kind and subject (`applications_pending`): a repeated request
    ///   refreshes it. Expired items are marked in the write transactions of their group before
    ///   anything else, so the index never holds a stale pending row against a new request.
    /// - Decisions (`approval_*`, `consent_*`) have the states `none`, `pending`, `accepted`,
    ///   `refused`. Items go with their group (cascade).
    /// - `application_reads`: per user, items created at or before `read_at` are read.
    static func v4(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE applications (
                app_key INTEGER PRIMARY KEY AUTOINCREMENT,
                app_id TEXT NOT NULL,
                application_id TEXT NOT NULL,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                kind TEXT NOT NULL CHECK (kind IN ('join', 'invitation')),
                state TEXT NOT NULL CHECK (state IN ('pending', 'accepted', 'refused', 'expired', 'withdrawn')),
                sender_id TEXT NOT NULL,
                subject_id TEXT NOT NULL,
                message TEXT NOT NULL DEFAULT '',
                created_at INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                approval_state TEXT NOT NULL CHECK (approval_state IN ('none', 'pending', 'accepted', 'refused')),
                approval_by TEXT,
                approval_message TEXT NOT NULL DEFAULT '',
                approval_at INTEGER,
                consent_state TEXT NOT NULL CHECK (consent_state IN ('none', 'pending', 'accepted', 'refused')),
                consent_by TEXT,
                consent_message TEXT NOT NULL DEFAULT '',
                consent_at INTEGER,
                handled_by TEXT,
                handle_message TEXT NOT NULL DEFAULT '',
                handled_at INTEGER,
                UNIQUE (app_id, application_id)
            );
            CREATE UNIQUE INDEX applications_pending ON applications(group_key, kind, subject_id)
                WHERE state = 'pending';
            CREATE INDEX applications_by_sender ON applications(app_id, sender_id, created_at);
            CREATE INDEX applications_by_subject ON applications(app_id, subject_id, created_at);
            CREATE INDEX applications_by_group ON applications(group_key, created_at);
            CREATE INDEX applications_due ON applications(app_id, expires_at) WHERE state = 'pending';

            CREATE TABLE application_reads (
                app_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                read_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id)
            ) WITHOUT ROWID;
            """)
    }

    /// v5: group message bodies.
    ///
    /// - A message is a `group_events` row of kind `GROUP_MESSAGE` (its sequence, time, sender,
    ///   and the store's commit path to subscribers) plus this row, keyed by the event's
    ///   `event_id`, holding the body. `group_key` and `seq` are repeated here so that history
    ///   pages and unread counts read one index, and no foreign key ties the body to its event
    ///   row: history outlives the event log's retention. Bodies go with their group (cascade).
    /// - `(group_key, sender_id, client_message_id)` is UNIQUE where a client id is given: a retry
    ///   finds the first message, and two concurrent retries cannot both insert.
    /// - `group_messages_by_seq` covers the unread count (`seq` above the read position, sender
    ///   not the reader) without reading the table.
    static func v5(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE group_messages (
                event_id INTEGER PRIMARY KEY,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                message_id TEXT NOT NULL,
                sender_id TEXT NOT NULL,
                client_message_id TEXT,
                type TEXT NOT NULL DEFAULT '',
                text TEXT NOT NULL DEFAULT '',
                payload BLOB NOT NULL DEFAULT x'',
                priority TEXT NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
                sender_name_card TEXT NOT NULL DEFAULT '',
                time INTEGER NOT NULL
            );
            CREATE INDEX group_messages_by_seq ON group_messages(group_key, seq, sender_id);
            CREATE UNIQUE INDEX group_messages_by_client_id
                ON group_messages(group_key, sender_id, client_message_id)
                WHERE client_message_id IS NOT NULL;
            """)
    }

    /// v6: how each member came in and who let them in (`Member.joinSource` as its integer code,
    /// read with every member row; `inviterID`). Members stored before keep 0 (unknown) and no
    /// inviter: the past is not guessed.
    static func v6(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE members ADD COLUMN join_source INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE members ADD COLUMN inviter_id TEXT;
            """)
    }

    /// v7: each user's joined-group count kept in `joined_counts`, so a limit check
    /// (`max_groups_per_user`, on every join, invitation and creation) reads one row instead of
    /// counting the user's memberships: a user in 1,000 groups made each check read 1,000 rows.
    ///
    /// - `count` is the number of undismissed groups other than AVChatRooms the user is a stored
    ///   member of (what the count query returned), backfilled here.
    /// - Triggers keep it in the transaction that changes it, whatever statement does it: a member
    ///   row inserted or deleted in a live group moves it by one; a group being dismissed takes one
    ///   from each of its members. (Groups are never deleted while live.)
    static func v7(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE joined_counts (
                app_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                count INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id)
            ) WITHOUT ROWID;
            INSERT INTO joined_counts (app_id, user_id, count)
                SELECT m.app_id, m.user_id, COUNT(*) FROM members m JOIN groups g ON g.group_key = m.group_key
                WHERE g.dismissed_at IS NULL AND g.type <> 'AVChatRoom'
                GROUP BY m.app_id, m.user_id;
            CREATE TRIGGER members_joined_count_insert AFTER INSERT ON members
            WHEN (SELECT type <> 'AVChatRoom' AND dismissed_at IS NULL FROM groups WHERE group_key = new.group_key)
            BEGIN
                INSERT INTO joined_counts (app_id, user_id, count) VALUES (new.app_id, new.user_id, 1)
                    ON CONFLICT (app_id, user_id) DO UPDATE SET count = count + 1;
            END;
            CREATE TRIGGER members_joined_count_delete AFTER DELETE ON members
            WHEN (SELECT type <> 'AVChatRoom' AND dismissed_at IS NULL FROM groups WHERE group_key = old.group_key)
            BEGIN
                UPDATE joined_counts SET count = count - 1 WHERE app_id = old.app_id AND user_id = old.user_id;
            END;
            CREATE TRIGGER groups_joined_count_dismiss AFTER UPDATE OF dismissed_at ON groups
            WHEN old.dismissed_at IS NULL AND new.dismissed_at IS NOT NULL AND new.type <> 'AVChatRoom'
            BEGIN
                UPDATE joined_counts SET count = count - 1
                WHERE app_id = new.app_id AND user_id IN (SELECT user_id FROM members WHERE group_key = new.group_key);
            END;
            """)
    }

    /// v8: two per-group settings, `edit_settings_permission` (who changes the other settings)
    /// and `owner_quit` (what an owner's quit does). Groups stored before get their type's
    /// default (`GroupTypePreset`): owner and admins change settings in Public and Meeting
    /// groups, the owner elsewhere; a Work owner's quit passes ownership to the longest-standing
    /// member, other owners cannot quit. `group_id` prefix search reads the
    /// `UNIQUE (app_id, group_id)` index (BINARY collation: byte order), so it needs none here.
    static func v8(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN edit_settings_permission TEXT NOT NULL DEFAULT 'owner';
            ALTER TABLE groups ADD COLUMN owner_quit TEXT NOT NULL DEFAULT 'refused';
            UPDATE groups SET edit_settings_permission = 'owner_and_admins' WHERE type IN ('Public', 'Meeting');
            UPDATE groups SET owner_quit = 'to_longest_standing_member' WHERE type = 'Work';
            """)
    }

    /// v9: a user's stream catch-up reads each of the user's groups by `event_id`
    /// (`group_events_by_group`) instead of the app's whole log; AVChatRoom presences
    /// (`room_presence`: a lease per room and viewer, ending at `expires_at`, milliseconds on the
    /// service's clock; `room_presence_by_user` serves the renewal of a viewer's leases,
    /// `room_presence_by_expiry` the sweep of ended ones).
    static func v9(_ db: Database) throws {
        try db.execute(sql: """
            CREATE INDEX group_events_by_group ON group_events(app_id, group_id, event_id);
            CREATE TABLE room_presence (
                app_id TEXT NOT NULL,
                group_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (app_id, group_id, user_id)
            ) WITHOUT ROWID;
            CREATE INDEX room_presence_by_user ON room_presence(app_id, user_id);
            CREATE INDEX room_presence_by_expiry ON room_presence(expires_at);
            """)
    }

    /// v10: who set the group mute (`GroupMuteState.operatorID`). Mutes set before keep none.
    static func v10(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE groups ADD COLUMN mute_operator TEXT")
    }

    /// v11: ban lists and mute bypass lists.
    ///
    /// - `group_bans`: one row per banned user of a group; `until_ms` is when the ban ends (NULL:
    ///   until lifted). An ended ban is ignored by every read and deleted by the next write of
    ///   the group's bans; rows go with the group (cascade). Listings page by `user_id`.
    /// - `groups.mute_bypass`: the members a group mute does not apply to, a JSON array of user
    ///   ids in the order they were added (`[]`: none).
    static func v11(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE group_bans (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                until_ms INTEGER,
                reason TEXT NOT NULL DEFAULT '',
                operator_id TEXT,
                banned_at INTEGER NOT NULL,
                PRIMARY KEY (group_key, user_id)
            ) WITHOUT ROWID;
            ALTER TABLE groups ADD COLUMN mute_bypass TEXT NOT NULL DEFAULT '[]';
            """)
    }

    /// v12: mentions, recall and slow mode.
    ///
    /// - Two settings on `groups`: `mention_all_permission` (who may @all; each type's default
    ///   for groups stored before) and `slow_mode_interval` (seconds, 0 = off).
    /// - On `group_messages`: `mention_all` (1 while an unrecalled message mentions everyone),
    ///   `mentioned_ids` (the JSON array of mentioned user ids, for display), `recalled_by` and
    ///   `recall_time` (NULL: not recalled; `recalled_by` NULL with a time: the backend).
    /// - `message_mentions`: one row per mentioned user of an unrecalled message (the sender's
    ///   own mention is not kept), so "has the user an unread @me" reads one index range
    ///   instead of history; a recall or a purge deletes the message's rows.
    /// - `group_messages_mention_all` (partial) answers "an unread @all" the same way;
    ///   `group_messages_by_sender` finds a sender's previous message for slow mode.
    static func v12(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN mention_all_permission TEXT NOT NULL DEFAULT 'everyone';
            ALTER TABLE groups ADD COLUMN slow_mode_interval INTEGER NOT NULL DEFAULT 0;
            UPDATE groups SET mention_all_permission = 'owner_and_admins' WHERE type IN ('Public', 'Meeting');
            UPDATE groups SET mention_all_permission = 'owner' WHERE type = 'AVChatRoom';
            ALTER TABLE group_messages ADD COLUMN mention_all INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE group_messages ADD COLUMN mentioned_ids TEXT NOT NULL DEFAULT '[]';
            ALTER TABLE group_messages ADD COLUMN recalled_by TEXT;
            ALTER TABLE group_messages ADD COLUMN recall_time INTEGER;
            CREATE INDEX group_messages_mention_all ON group_messages(group_key, seq) WHERE mention_all = 1;
            CREATE INDEX group_messages_by_sender ON group_messages(group_key, sender_id, seq);
            CREATE TABLE message_mentions (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                PRIMARY KEY (group_key, user_id, seq)
            ) WITHOUT ROWID;
            """)
    }

    /// v13: pinned messages. `pin_permission` is who may pin (NULL: the type's default,
    /// `GroupTypePreset`, so groups stored before need no rewrite); `pins` the group's pins
    /// (`PinnedMessageCoding`; NULL: none). A group holds a handful (the app's
    /// `max_pinned_messages`), read with the group row and cached with it.
    static func v13(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN pin_permission TEXT;
            ALTER TABLE groups ADD COLUMN pins TEXT;
            """)
    }

    /// v14: group attributes (`group_attributes`: key, opaque value, the version that wrote it,
    /// when and by whom) and counters (`group_counters`: key and value), each keyed by group;
    /// invite links (`invite_links`: the token's SHA-256, never the token, unique per app; use
    /// count, expiry, revocation), the link of a member and of a join application
    /// (`members.invite_link_id`, `applications.invite_link_id`) and the group
    /// setting `invite_link_permission` (groups stored before get their type's default: everyone
    /// in Work, nobody in AVChatRoom, owner and admins elsewhere).
    static func v14(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN invite_link_permission TEXT NOT NULL DEFAULT 'owner_and_admins';
            UPDATE groups SET invite_link_permission = 'everyone' WHERE type = 'Work';
            UPDATE groups SET invite_link_permission = 'nobody' WHERE type = 'AVChatRoom';
            ALTER TABLE members ADD COLUMN invite_link_id TEXT;
            ALTER TABLE applications ADD COLUMN invite_link_id TEXT;
            CREATE TABLE invite_links (
                app_id TEXT NOT NULL,
                link_id TEXT NOT NULL,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                token_hash TEXT NOT NULL,
                created_by TEXT,
                created_at INTEGER NOT NULL,
                expires_at INTEGER,
                max_uses INTEGER NOT NULL,
                use_count INTEGER NOT NULL,
                requires_approval INTEGER NOT NULL,
                revoked_at INTEGER,
                revoked_by TEXT,
                PRIMARY KEY (app_id, link_id)
            ) WITHOUT ROWID;
            CREATE UNIQUE INDEX invite_links_by_token ON invite_links(app_id, token_hash);
            CREATE INDEX invite_links_by_group ON invite_links(group_key);
            CREATE TABLE group_attributes (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                key TEXT NOT NULL,
                value BLOB NOT NULL,
                version INTEGER NOT NULL,
                updated_at INTEGER NOT NULL,
                updated_by TEXT,
                PRIMARY KEY (group_key, key)
            ) WITHOUT ROWID;
            CREATE TABLE group_counters (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                key TEXT NOT NULL,
                value INTEGER NOT NULL,
                PRIMARY KEY (group_key, key)
            ) WITHOUT ROWID;
            """)
    }

    /// v15: versioned member sync and joined-group sync (their reads cost what they return).
    ///
    /// - `groups.member_version`: one more with every write that inserts, updates or removes
    ///   member rows; `members.changed_version` holds the version of the row's last change
    ///   (`members_by_version` reads the rows after a version, one index range).
    /// - `member_tombstones`: who was removed at which version (one row per group and user,
    ///   deleted when the user rejoins; `tomb_id` orders a version's removals for paging).
    ///   Retention deletes those older than the app's event retention and raises
    ///   `groups.member_floor` to the highest version it deleted: a sync from below it must
    ///   reload the whole list.
    /// - `joined_changes`: per user and group, the `event_id` of the last write that joined,
    ///   removed or changed the user's membership or remark (`joined_changes_by_version` reads a
    ///   user's rows after an event id); `groups.info_event_id` is the `event_id` of the last write
    ///   that changed the group's record (profile, settings, owner, mute, custom fields, dismissal).
    /// - Rows stored before keep 0 everywhere: a sync from 0 lists them; a client can only hold a
    ///   version given after this migration, and every later change moves past it.
    static func v15(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN member_version INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE groups ADD COLUMN member_floor INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE groups ADD COLUMN info_event_id INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE members ADD COLUMN changed_version INTEGER NOT NULL DEFAULT 0;
            CREATE INDEX members_by_version ON members(group_key, changed_version, join_order);
            CREATE TABLE member_tombstones (
                tomb_id INTEGER PRIMARY KEY,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                app_id TEXT NOT NULL,
                version INTEGER NOT NULL,
                removed_at INTEGER NOT NULL,
                UNIQUE (group_key, user_id)
            );
            CREATE INDEX member_tombstones_by_version ON member_tombstones(group_key, version, tomb_id);
            CREATE INDEX member_tombstones_by_time ON member_tombstones(app_id, removed_at);
            CREATE TABLE joined_changes (
                app_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                event_id INTEGER NOT NULL,
                PRIMARY KEY (app_id, user_id, group_key)
            ) WITHOUT ROWID;
            CREATE INDEX joined_changes_by_version ON joined_changes(app_id, user_id, event_id);
            """)
    }

    /// The `CHECK (column IN (…))` constraints of three values or more, and what v16 makes of
    /// them: the same test as comparisons joined by `OR`.
    static let listChecks: [(table: String, column: String, values: [String])] = [
        ("groups", "type", ["Work", "Public", "Meeting", "AVChatRoom"]),
        ("members", "role", ["owner", "admin", "member"]),
        ("group_events", "recipient_kind", ["group", "user", "approvers"]),
        ("applications", "state", ["pending", "accepted", "refused", "expired", "withdrawn"]),
        ("applications", "approval_state", ["none", "pending", "accepted", "refused"]),
        ("applications", "consent_state", ["none", "pending", "accepted", "refused"]),
        ("group_messages", "priority", ["high", "normal", "low"]),
    ]

    /// v16: each `CHECK (column IN ('a', 'b', 'c'…))` becomes `CHECK (column = 'a' OR column =
    /// 'b' OR …)`, the same constraint (a NULL passes both; the columns are `NOT NULL`).
    ///
    /// SQLite evaluates a list of more than two constants by building a temporary b-tree of the
    /// list for every row it inserts (two pages zeroed, a table created and dropped): a send, one
    /// event and one message, paid about 30,000 instructions for its two checks. Comparisons cost
    /// a few instructions. The rows on disk do not change, so the table definitions are edited in
    /// place (`PRAGMA writable_schema`, the way SQLite documents for a constraint change that
    /// leaves the stored rows valid: https://sqlite.org/lang_altertable.html#otheralter); the
    /// schema version moves and the schema is reloaded, so every connection reads the new
    /// definitions.
    static func v16(_ db: Database) throws {
        try editTableDefinitions(db, migration: "v16", edits: listChecks.map { check in
            let list = check.values.map { "'\($0)'" }
            return (
                table: check.table, before: "CHECK (\(check.column) IN (\(list.joined(separator: ", "))))",
                after: "CHECK (\(list.map { "\(check.column) = \($0)" }.joined(separator: " OR ")))")
        })
    }

    /// Edits table definitions in place, each `before` of its table's `CREATE TABLE` text
    /// becoming `after` (`PRAGMA writable_schema`: only for changes that leave every stored row
    /// valid, such as a constraint that accepts more), then moves the schema version and reloads
    /// the schema so every connection reads the new definitions.
    /// - Throws: A `DatabaseError` naming `migration` when a table's text lacks its `before`.
    static func editTableDefinitions(
        _ db: Database, migration: String, edits: [(table: String, before: String, after: String)]
    ) throws {
        let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
        try db.execute(sql: "PRAGMA writable_schema = ON")
        for edit in edits {
            try db.execute(
                sql: "UPDATE sqlite_schema SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name = ? AND instr(sql, ?) > 0",
                arguments: [edit.before, edit.after, edit.table, edit.before])
            guard db.changesCount == 1 else {
                throw DatabaseError(message: "\(migration): \(edit.table) has no \(edit.before)")
            }
        }
        try db.execute(sql: "PRAGMA schema_version = \(version + 1)")
        // RESET, not OFF: this connection (the writer, which runs the migrations and keeps its
        // parsed schema) reads the new definitions too; with OFF it would keep checking the old
        // ones until reopened, since its schema version is the file's.
        try db.execute(sql: "PRAGMA writable_schema = RESET")
        db.clearSchemaCache()
    }

    /// v17: message reactions.
    ///
    /// - `reaction_counts`: one row per key on a message: how many users react with it, the
    ///   ordinal the next of them gets (`next_ordinal`) and the key's own ordinal among the
    ///   message's keys (`key_ordinal`, the order keys are listed in). A message holds at most the
    ///   app's `max_reaction_keys_per_message` rows.
    /// - `message_reactions`: one row per user and key on a message, keyed by
    ///   `(group_key, seq, user_id, reaction_key)` so that a user's keys on a message are one
    ///   range; `message_reactions_by_key` lists a key's users by ordinal (earliest first, the
    ///   page token's order).
    /// - Adding or removing a reaction reads the message's count rows and the user's rows, inserts
    ///   or deletes one user row and writes one count row: no count over the message's reactions.
    ///   A purge of messages deletes their rows; a recalled message keeps them unread.
    static func v17(_ db: Database) throws {
        try db.execute(sql: """
            CREATE TABLE reaction_counts (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                reaction_key TEXT NOT NULL,
                count INTEGER NOT NULL,
                next_ordinal INTEGER NOT NULL,
                key_ordinal INTEGER NOT NULL,
                PRIMARY KEY (group_key, seq, reaction_key)
            ) WITHOUT ROWID;
            CREATE TABLE message_reactions (
                group_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                user_id TEXT NOT NULL,
                reaction_key TEXT NOT NULL,
                ordinal INTEGER NOT NULL,
                time INTEGER NOT NULL,
                PRIMARY KEY (group_key, seq, user_id, reaction_key)
            ) WITHOUT ROWID;
            CREATE UNIQUE INDEX message_reactions_by_key ON message_reactions(group_key, seq, reaction_key, ordinal);
            """)
    }

    /// v18: message edits. On `group_messages`: `edit_count` (0: never edited), `edited_by` and
    /// `edit_time` of the latest edit (`edit_time` NULL: never edited; `edited_by` NULL with a
    /// time: the backend). An edit rewrites `text` and `payload` in place.
    static func v18(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE group_messages ADD COLUMN edit_count INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE group_messages ADD COLUMN edited_by TEXT;
            ALTER TABLE group_messages ADD COLUMN edit_time INTEGER;
            """)
    }

    /// v19: replies. On `group_messages`, the reference a reply holds (`reply_seq` NULL: not a
    /// reply) and its snapshot of the original: `reply_message_id`, `reply_sender_id`,
    /// `reply_type` and `reply_preview` (its first 100 characters of text; NULL with a
    /// `reply_seq`: the original was recalled, and `reply_type` is then ''). An edit of the
    /// original rewrites its replies' previews, its recall clears them, found by
    /// `group_messages_by_reply`, which also lists a message's replies in order.
    static func v19(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE group_messages ADD COLUMN reply_seq INTEGER;
            ALTER TABLE group_messages ADD COLUMN reply_message_id TEXT;
            ALTER TABLE group_messages ADD COLUMN reply_sender_id TEXT;
            ALTER TABLE group_messages ADD COLUMN reply_type TEXT;
            ALTER TABLE group_messages ADD COLUMN reply_preview TEXT;
            CREATE INDEX group_messages_by_reply ON group_messages(group_key, reply_seq, seq) WHERE reply_seq IS NOT NULL;
            """)
    }

    /// v20: the `Community` group type. `groups.type`'s constraint (v16's comparisons) takes one
    /// more value, edited in place as v16 edits it: no stored row changes, and every row passes
    /// the new constraint as it passed the old one.
    static func v20(_ db: Database) throws {
        try editTableDefinitions(db, migration: "v20", edits: [
            (table: "groups", before: "type = 'AVChatRoom')", after: "type = 'AVChatRoom' OR type = 'Community')"),
        ])
    }

    /// v21: topics of communities. A topic is a `groups` row of its own (its profile, custom
    /// fields, mute, sequence, messages, pins) whose `parent_key` is its community's
    /// `group_key`; its members, bans, settings and owner are read from the community.
    /// `topic_reads` keeps each member's read position in a topic, with the member's
    /// `joined_at` when it was written: a position counts only while that membership lasts
    /// (after a quit and a rejoin the member starts over), so joins and quits write nothing
    /// here. `groups_by_parent` lists a community's topics in creation order.
    static func v21(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN parent_key INTEGER REFERENCES groups(group_key);
            CREATE INDEX groups_by_parent ON groups(parent_key, created_at) WHERE parent_key IS NOT NULL;
            CREATE TABLE topic_reads (
                topic_key INTEGER NOT NULL REFERENCES groups(group_key) ON DELETE CASCADE,
                user_id TEXT NOT NULL,
                last_read_seq INTEGER NOT NULL,
                joined_at INTEGER NOT NULL,
                PRIMARY KEY (topic_key, user_id)
            ) WITHOUT ROWID;
            """)
    }

    /// v22: permission groups of communities. A community's permission groups (names, data,
    /// community and topic values) are one text column of its row, read with the group and
    /// cached with it; a member's assignments are one text column of the member row, read with
    /// the membership, so a permission decision reads nothing more. The partial index lists a
    /// community's members who are in any permission group (member counts and member lists of
    /// permission groups) without reading the others.
    static func v22(_ db: Database) throws {
        try db.execute(sql: """
            ALTER TABLE groups ADD COLUMN permission_groups TEXT;
            ALTER TABLE members ADD COLUMN permission_groups TEXT;
            CREATE INDEX members_in_permission_groups ON members(group_key, user_id) WHERE permission_groups IS NOT NULL;
            """)
    }

    /// v23: private topics. `groups.is_private` (1: a private topic, seen only by the community's
    /// owner and admins and the members granted `view_topic`; 0 for every other row).
    static func v23(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE groups ADD COLUMN is_private INTEGER NOT NULL DEFAULT 0")
    }
}
