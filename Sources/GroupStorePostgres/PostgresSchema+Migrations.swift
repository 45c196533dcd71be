import Foundation

/// The migrations' SQL, in the order they were written (``PostgresSchema/migrations`` lists
/// them in the order they apply). Append new ones; never edit a shipped one.
extension PostgresSchema {
    /// v3: two per-group settings, `edit_settings_permission` (who changes the other settings)
    /// and `owner_quit` (what an owner's quit does), with each type's default for groups stored
    /// before (`GroupTypePreset`: owner and admins change settings in Public and Meeting groups,
    /// the owner elsewhere; a Work owner's quit passes ownership to the longest-standing member,
    /// other owners cannot quit); and `groups_by_id_bytes`, the group ids in byte order
    /// (`COLLATE "C"`) whatever the database's collation, so a `group_id` prefix search reads an
    /// index range.
    static let v3 = """
        ALTER TABLE groups ADD COLUMN edit_settings_permission TEXT NOT NULL DEFAULT 'owner';
        ALTER TABLE groups ADD COLUMN owner_quit TEXT NOT NULL DEFAULT 'refused';
        UPDATE groups SET edit_settings_permission = 'owner_and_admins' WHERE type IN ('Public', 'Meeting');
        UPDATE groups SET owner_quit = 'to_longest_standing_member' WHERE type = 'Work';
        CREATE INDEX groups_by_id_bytes ON groups (app_id, group_id COLLATE "C");
        """

    /// v4: a user's stream catch-up reads each of the user's groups by `event_id`
    /// (`group_events_by_group`) instead of the app's whole log; AVChatRoom presences
    /// (`room_presence`: a lease per room and viewer, ending at `expires_at`, milliseconds on the
    /// clock of the node that last held it; renewed by the nodes serving the viewer's streams).
    static let v4 = """
        CREATE INDEX group_events_by_group ON group_events (app_id, group_id, event_id);
        CREATE TABLE room_presence (
            app_id TEXT NOT NULL,
            group_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            expires_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_id, user_id)
        );
        CREATE INDEX room_presence_by_user ON room_presence (app_id, user_id);
        CREATE INDEX room_presence_by_expiry ON room_presence (expires_at);
        """

    /// v2: AVChatRoom messages relayed between nodes. They keep no history (as on SQLite): a row
    /// lives about a minute, long enough for every node's follower to read it and hand it to its
    /// live streams.
    ///
    /// - `groupd_relay_room_message(...)` inserts one in a statement of its own, holding the
    ///   app's room lock to its commit (so `id` order is commit order within an app, as
    ///   `event_id` is), and notifies ``roomChannel`` with the app id.
    /// - `node` is the sending process (its own follower skips the row: it delivered it already).
    static let v2 = """
        CREATE TABLE room_messages (
            app_id TEXT NOT NULL,
            id BIGSERIAL NOT NULL,
            node TEXT NOT NULL,
            group_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            sender_name_card TEXT NOT NULL,
            client_message_id TEXT,
            type TEXT NOT NULL,
            text TEXT NOT NULL,
            payload BYTEA NOT NULL,
            priority TEXT NOT NULL,
            time BIGINT NOT NULL,
            PRIMARY KEY (app_id, id)
        );
        CREATE INDEX room_messages_by_time ON room_messages (time);

        CREATE FUNCTION groupd_relay_room_message(
            p_app TEXT, p_node TEXT, p_group TEXT, p_message_id TEXT, p_sender TEXT, p_name_card TEXT,
            p_client_id TEXT, p_type TEXT, p_text TEXT, p_payload BYTEA, p_priority TEXT, p_time BIGINT)
        RETURNS BIGINT LANGUAGE plpgsql AS $$
        DECLARE
            new_id BIGINT;
        BEGIN
            PERFORM pg_advisory_xact_lock(1735393284, hashtext(p_app));
            INSERT INTO room_messages (app_id, node, group_id, message_id, sender_id, sender_name_card,
                    client_message_id, type, text, payload, priority, time)
                VALUES (p_app, p_node, p_group, p_message_id, p_sender, p_name_card, p_client_id, p_type, p_text,
                    p_payload, p_priority, p_time)
                RETURNING id INTO new_id;
            PERFORM pg_notify('groupd_rooms', p_app);
            RETURN new_id;
        END $$;
        """

    /// v1: the schema of SQLite's v1–v7 (docs/STORE.md), keyed by app.
    ///
    /// - Integers are `BIGINT` (times in milliseconds, flags 0/1), texts `TEXT`, custom values `BYTEA`.
    /// - `groups.group_key`, `group_events.event_id` and `applications.app_key` come from sequences
    ///   (`event_id` until v11, which numbers each app's events itself). `event_id` order is commit
    ///   order within an app: until v11 an app's write transactions held the app's advisory lock
    ///   from their first statement to their commit.
    /// - `has_custom` and `joined_counts` are kept by triggers, as on SQLite.
    /// - `app_event_heads`: each app's highest committed `event_id`, written by the transaction
    ///   that appends: the stream's "latest" and the start of every node's follower (since v11
    ///   also the app's ticket: a batch's last statement takes its positions from it).
    /// - Name search: `pg_trgm` (a GIN trigram index on `groups.name`) where SQLite has FTS5 trigram.
    static let v1 = """
        CREATE EXTENSION IF NOT EXISTS pg_trgm;

        CREATE TABLE groups (
            app_id TEXT NOT NULL,
            group_key BIGSERIAL NOT NULL,
            group_id TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN ('Work', 'Public', 'Meeting', 'AVChatRoom')),
            name TEXT NOT NULL,
            introduction TEXT NOT NULL DEFAULT '',
            notification TEXT NOT NULL DEFAULT '',
            face_url TEXT NOT NULL DEFAULT '',
            owner_id TEXT,
            max_members BIGINT,
            member_count BIGINT NOT NULL DEFAULT 0,
            join_option TEXT NOT NULL,
            join_approvers TEXT NOT NULL,
            invite_permission TEXT NOT NULL,
            invitee_must_accept BIGINT NOT NULL,
            invitation_needs_approval BIGINT NOT NULL,
            remove_members_permission TEXT NOT NULL,
            edit_profile_permission TEXT NOT NULL,
            edit_member_info_permission TEXT NOT NULL,
            mute_mode TEXT NOT NULL DEFAULT 'none',
            mute_roles TEXT NOT NULL DEFAULT '',
            mute_until BIGINT,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            latest_seq BIGINT NOT NULL DEFAULT 0,
            next_join_order BIGINT NOT NULL DEFAULT 1,
            dismissed_at BIGINT,
            has_custom BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (app_id, group_key),
            UNIQUE (app_id, group_id)
        );
        CREATE INDEX groups_name_trigram ON groups USING gin (name gin_trgm_ops);

        CREATE TABLE group_custom (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            key TEXT NOT NULL,
            value BYTEA NOT NULL,
            PRIMARY KEY (app_id, group_key, key),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );

        CREATE TABLE members (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
            join_order BIGINT NOT NULL,
            join_seq BIGINT NOT NULL DEFAULT 0,
            joined_at BIGINT NOT NULL,
            name_card TEXT NOT NULL DEFAULT '',
            muted_until BIGINT,
            receive_option TEXT NOT NULL DEFAULT 'receive',
            last_read_seq BIGINT NOT NULL DEFAULT 0,
            has_custom BIGINT NOT NULL DEFAULT 0,
            join_source BIGINT NOT NULL DEFAULT 0,
            inviter_id TEXT,
            PRIMARY KEY (app_id, group_key, user_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE UNIQUE INDEX members_by_join_order ON members (app_id, group_key, join_order);
        CREATE INDEX members_by_role ON members (app_id, group_key, role, join_order);
        CREATE INDEX members_by_user ON members (app_id, user_id, group_key);
        CREATE INDEX members_by_user_joined ON members (app_id, user_id, joined_at, group_key);
        CREATE INDEX members_by_name_card ON members (app_id, group_key, name_card) WHERE name_card <> '';

        CREATE TABLE member_custom (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            value BYTEA NOT NULL,
            PRIMARY KEY (app_id, group_key, user_id, key),
            FOREIGN KEY (app_id, group_key, user_id) REFERENCES members (app_id, group_key, user_id) ON DELETE CASCADE
        );
        CREATE INDEX member_custom_by_user ON member_custom (app_id, user_id, group_key);

        CREATE TABLE group_remarks (
            app_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            remark TEXT NOT NULL,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, group_key),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE INDEX group_remarks_by_group ON group_remarks (app_id, group_key);

        CREATE TABLE retained_mutes (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            muted_until BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_key, user_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );

        CREATE TABLE group_events (
            app_id TEXT NOT NULL,
            event_id BIGSERIAL NOT NULL,
            group_key BIGINT NOT NULL,
            group_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            kind TEXT NOT NULL,
            time BIGINT NOT NULL,
            operator_id TEXT,
            targets TEXT NOT NULL DEFAULT '[]',
            changes TEXT NOT NULL DEFAULT '{}',
            recipient_kind TEXT NOT NULL CHECK (recipient_kind IN ('group', 'user', 'approvers')),
            recipient_user TEXT,
            PRIMARY KEY (app_id, event_id),
            UNIQUE (app_id, group_key, seq),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE INDEX group_events_by_recipient ON group_events (app_id, recipient_user, event_id)
            WHERE recipient_user IS NOT NULL;
        CREATE INDEX group_events_by_time ON group_events (app_id, time);

        CREATE TABLE applications (
            app_id TEXT NOT NULL,
            app_key BIGSERIAL NOT NULL,
            application_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('join', 'invitation')),
            state TEXT NOT NULL CHECK (state IN ('pending', 'accepted', 'refused', 'expired', 'withdrawn')),
            sender_id TEXT NOT NULL,
            subject_id TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            approval_state TEXT NOT NULL CHECK (approval_state IN ('none', 'pending', 'accepted', 'refused')),
            approval_by TEXT,
            approval_message TEXT NOT NULL DEFAULT '',
            approval_at BIGINT,
            consent_state TEXT NOT NULL CHECK (consent_state IN ('none', 'pending', 'accepted', 'refused')),
            consent_by TEXT,
            consent_message TEXT NOT NULL DEFAULT '',
            consent_at BIGINT,
            handled_by TEXT,
            handle_message TEXT NOT NULL DEFAULT '',
            handled_at BIGINT,
            PRIMARY KEY (app_id, app_key),
            UNIQUE (app_id, application_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE UNIQUE INDEX applications_pending ON applications (app_id, group_key, kind, subject_id)
            WHERE state = 'pending';
        CREATE INDEX applications_by_sender ON applications (app_id, sender_id, created_at);
        CREATE INDEX applications_by_subject ON applications (app_id, subject_id, created_at);
        CREATE INDEX applications_by_group ON applications (app_id, group_key, created_at);
        CREATE INDEX applications_due ON applications (app_id, expires_at) WHERE state = 'pending';

        CREATE TABLE application_reads (
            app_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            read_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id)
        );

        CREATE TABLE group_messages (
            app_id TEXT NOT NULL,
            event_id BIGINT NOT NULL,
            group_key BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            message_id TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            client_message_id TEXT,
            type TEXT NOT NULL DEFAULT '',
            text TEXT NOT NULL DEFAULT '',
            payload BYTEA NOT NULL DEFAULT '\\x',
            priority TEXT NOT NULL CHECK (priority IN ('high', 'normal', 'low')),
            sender_name_card TEXT NOT NULL DEFAULT '',
            time BIGINT NOT NULL,
            PRIMARY KEY (app_id, event_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE INDEX group_messages_by_seq ON group_messages (app_id, group_key, seq, sender_id);
        CREATE UNIQUE INDEX group_messages_by_client_id
            ON group_messages (app_id, group_key, sender_id, client_message_id)
            WHERE client_message_id IS NOT NULL;

        CREATE TABLE app_event_heads (
            app_id TEXT PRIMARY KEY,
            last_event_id BIGINT NOT NULL
        );

        CREATE TABLE joined_counts (
            app_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            count BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id)
        );

        CREATE FUNCTION groupd_group_custom_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                UPDATE groups SET has_custom = 1
                    WHERE app_id = NEW.app_id AND group_key = NEW.group_key AND has_custom = 0;
            ELSE
                UPDATE groups SET has_custom = CASE WHEN EXISTS (
                        SELECT 1 FROM group_custom WHERE app_id = OLD.app_id AND group_key = OLD.group_key)
                    THEN 1 ELSE 0 END
                    WHERE app_id = OLD.app_id AND group_key = OLD.group_key;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER group_custom_changed AFTER INSERT OR DELETE ON group_custom
            FOR EACH ROW EXECUTE FUNCTION groupd_group_custom_changed();

        CREATE FUNCTION groupd_member_custom_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' THEN
                UPDATE members SET has_custom = 1
                    WHERE app_id = NEW.app_id AND group_key = NEW.group_key AND user_id = NEW.user_id
                      AND has_custom = 0;
            ELSE
                UPDATE members SET has_custom = CASE WHEN EXISTS (
                        SELECT 1 FROM member_custom
                        WHERE app_id = OLD.app_id AND group_key = OLD.group_key AND user_id = OLD.user_id)
                    THEN 1 ELSE 0 END
                    WHERE app_id = OLD.app_id AND group_key = OLD.group_key AND user_id = OLD.user_id;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER member_custom_changed AFTER INSERT OR DELETE ON member_custom
            FOR EACH ROW EXECUTE FUNCTION groupd_member_custom_changed();

        CREATE FUNCTION groupd_member_counted() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            counted BOOLEAN;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT type <> 'AVChatRoom' AND dismissed_at IS NULL INTO counted
                    FROM groups WHERE app_id = NEW.app_id AND group_key = NEW.group_key;
                IF counted THEN
                    INSERT INTO joined_counts (app_id, user_id, count) VALUES (NEW.app_id, NEW.user_id, 1)
                        ON CONFLICT (app_id, user_id) DO UPDATE SET count = joined_counts.count + 1;
                END IF;
            ELSE
                SELECT type <> 'AVChatRoom' AND dismissed_at IS NULL INTO counted
                    FROM groups WHERE app_id = OLD.app_id AND group_key = OLD.group_key;
                IF counted THEN
                    UPDATE joined_counts SET count = count - 1 WHERE app_id = OLD.app_id AND user_id = OLD.user_id;
                END IF;
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER members_joined_count AFTER INSERT OR DELETE ON members
            FOR EACH ROW EXECUTE FUNCTION groupd_member_counted();

        CREATE FUNCTION groupd_group_dismissed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF OLD.dismissed_at IS NULL AND NEW.dismissed_at IS NOT NULL AND NEW.type <> 'AVChatRoom' THEN
                UPDATE joined_counts SET count = count - 1
                WHERE app_id = NEW.app_id AND user_id IN (
                    SELECT user_id FROM members WHERE app_id = NEW.app_id AND group_key = NEW.group_key);
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER groups_joined_count_dismiss AFTER UPDATE OF dismissed_at ON groups
            FOR EACH ROW EXECUTE FUNCTION groupd_group_dismissed();
        """

    /// v5: who set the group mute (`GroupMuteState.operatorID`). Mutes set before keep none.
    static let v5 = """
        ALTER TABLE groups ADD COLUMN mute_operator TEXT;
        """

    /// v6: ban lists (`group_bans`: `until_ms` NULL = until lifted; ended bans are ignored by
    /// reads and deleted by the next write of the group's bans; listings page by `user_id`) and
    /// mute bypass lists (`groups.mute_bypass`, a JSON array of user ids, `[]`: none).
    static let v6 = """
        CREATE TABLE group_bans (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            until_ms BIGINT,
            reason TEXT NOT NULL DEFAULT '',
            operator_id TEXT,
            banned_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_key, user_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        ALTER TABLE groups ADD COLUMN mute_bypass TEXT NOT NULL DEFAULT '[]';
        """

    /// v7: mentions, recall and slow mode (SQLite's v12, keyed by app): the settings
    /// `mention_all_permission` (each type's default for groups stored before) and
    /// `slow_mode_interval`; on `group_messages` `mention_all`, `mentioned_ids` (JSON array),
    /// `recalled_by`, `recall_time`; `message_mentions` (one row per mentioned user of an
    /// unrecalled message, the sender's own mention not kept) and the partial index of @all
    /// messages, so an unread mention is an index probe; `group_messages_by_sender` for slow mode.
    static let v7 = """
        ALTER TABLE groups ADD COLUMN mention_all_permission TEXT NOT NULL DEFAULT 'everyone';
        ALTER TABLE groups ADD COLUMN slow_mode_interval BIGINT NOT NULL DEFAULT 0;
        UPDATE groups SET mention_all_permission = 'owner_and_admins' WHERE type IN ('Public', 'Meeting');
        UPDATE groups SET mention_all_permission = 'owner' WHERE type = 'AVChatRoom';
        ALTER TABLE group_messages ADD COLUMN mention_all BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE group_messages ADD COLUMN mentioned_ids TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE group_messages ADD COLUMN recalled_by TEXT;
        ALTER TABLE group_messages ADD COLUMN recall_time BIGINT;
        CREATE INDEX group_messages_mention_all ON group_messages (app_id, group_key, seq) WHERE mention_all = 1;
        CREATE INDEX group_messages_by_sender ON group_messages (app_id, group_key, sender_id, seq);
        CREATE TABLE message_mentions (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_key, user_id, seq),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        """

    /// v8: pinned messages. `pin_permission` is who may pin (NULL: the type's default, so groups
    /// stored before need no rewrite); `pins` the group's pins (`PinnedMessageCoding`; NULL:
    /// none), read with the group row and cached with it.
    static let v8 = """
        ALTER TABLE groups ADD COLUMN pin_permission TEXT;
        ALTER TABLE groups ADD COLUMN pins TEXT;
        """

    /// v9: group attributes (`group_attributes`: key, opaque value, the version that wrote it,
    /// when and by whom) and counters (`group_counters`: key and value), each keyed by group;
    /// invite links (`invite_links`, the token's SHA-256 unique per app), `members.invite_link_id`,
    /// `applications.invite_link_id` and `groups.invite_link_permission` (each type's default for groups stored before), as
    /// SQLite's v14.
    static let v9 = """
        ALTER TABLE groups ADD COLUMN invite_link_permission TEXT NOT NULL DEFAULT 'owner_and_admins';
        UPDATE groups SET invite_link_permission = 'everyone' WHERE type = 'Work';
        UPDATE groups SET invite_link_permission = 'nobody' WHERE type = 'AVChatRoom';
        ALTER TABLE members ADD COLUMN invite_link_id TEXT;
        ALTER TABLE applications ADD COLUMN invite_link_id TEXT;
        CREATE TABLE invite_links (
            app_id TEXT NOT NULL,
            link_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            token_hash TEXT NOT NULL,
            created_by TEXT,
            created_at BIGINT NOT NULL,
            expires_at BIGINT,
            max_uses BIGINT NOT NULL,
            use_count BIGINT NOT NULL,
            requires_approval BIGINT NOT NULL,
            revoked_at BIGINT,
            revoked_by TEXT,
            PRIMARY KEY (app_id, link_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE UNIQUE INDEX invite_links_by_token ON invite_links (app_id, token_hash);
        CREATE INDEX invite_links_by_group ON invite_links (app_id, group_key);
        CREATE TABLE group_attributes (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            key TEXT NOT NULL,
            value BYTEA NOT NULL,
            version BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            updated_by TEXT,
            PRIMARY KEY (app_id, group_key, key),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE TABLE group_counters (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            key TEXT NOT NULL,
            value BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_key, key),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        """

    /// v10: versioned member sync and joined-group sync, as SQLite's v15 (docs/STORE.md):
    /// `groups.member_version`, `member_floor` and `info_event_id`, `members.changed_version`
    /// (`members_by_version`), `member_tombstones` (`tomb_id` from a sequence orders a version's
    /// removals) and `joined_changes`, keyed by app; `members_by_user_bytes`, a group's user ids in
    /// byte order (`COLLATE "C"`) whatever the database's collation, so a user id prefix search
    /// reads an index range.
    static let v10 = """
        ALTER TABLE groups ADD COLUMN member_version BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE groups ADD COLUMN member_floor BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE groups ADD COLUMN info_event_id BIGINT NOT NULL DEFAULT 0;
        ALTER TABLE members ADD COLUMN changed_version BIGINT NOT NULL DEFAULT 0;
        CREATE INDEX members_by_version ON members (app_id, group_key, changed_version, join_order);
        CREATE INDEX members_by_user_bytes ON members (app_id, group_key, user_id COLLATE "C");
        CREATE TABLE member_tombstones (
            app_id TEXT NOT NULL,
            tomb_id BIGSERIAL NOT NULL,
            group_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            version BIGINT NOT NULL,
            removed_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, tomb_id),
            UNIQUE (app_id, group_key, user_id),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE INDEX member_tombstones_by_version ON member_tombstones (app_id, group_key, version, tomb_id);
        CREATE INDEX member_tombstones_by_time ON member_tombstones (app_id, removed_at);
        CREATE TABLE joined_changes (
            app_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            event_id BIGINT NOT NULL,
            PRIMARY KEY (app_id, user_id, group_key),
            FOREIGN KEY (app_id, group_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        CREATE INDEX joined_changes_by_version ON joined_changes (app_id, user_id, event_id);
        """

    /// v11: an app's writes in parallel on every node, its positions dense and in commit order.
    ///
    /// - `groupd_lock_batch(exclusive, shared, keys)`: a write batch's first statement. It takes
    ///   the apps' write locks in app order (exclusive for a batch holding a mutation of a whole
    ///   app, shared otherwise), then the 64-bit keys of the groups and users the batch writes,
    ///   in the order given (ascending): every batch takes its locks in one global order, so
    ///   batches never deadlock on them.
    /// - `group_events.event_id` is no longer drawn from a sequence: a batch's last statement
    ///   (``PostgresStreamTail``) takes its app's next positions from `app_event_heads` (the
    ///   app's ticket row) and inserts its events with them. Each app's head starts at the highest
    ///   id it holds, so every cursor and sync version a client holds stays valid and new
    ///   positions continue above it.
    /// - `group_messages` is keyed by group and sequence, as its event is. A body is written
    ///   before the last statement (so a later mutation of the batch finds it), with its event's
    ///   provisional id as `event_id`; readers take the final id from the event row
    ///   (``PostgresMessageRows/columns``). `group_messages_by_seq` is the key's prefix now, and
    ///   goes.
    static let v11 = """
        INSERT INTO app_event_heads (app_id, last_event_id)
            SELECT app_id, max(event_id) FROM group_events GROUP BY app_id
            ON CONFLICT (app_id) DO UPDATE
                SET last_event_id = greatest(app_event_heads.last_event_id, excluded.last_event_id);
        ALTER TABLE group_events ALTER COLUMN event_id DROP DEFAULT;
        DROP SEQUENCE group_events_event_id_seq;
        ALTER TABLE group_messages DROP CONSTRAINT group_messages_pkey;
        ALTER TABLE group_messages ADD PRIMARY KEY (app_id, group_key, seq);
        DROP INDEX group_messages_by_seq;
        CREATE FUNCTION groupd_lock_batch(p_exclusive TEXT[], p_shared TEXT[], p_keys BIGINT[])
        RETURNS VOID LANGUAGE plpgsql AS $$
        DECLARE
            l_app RECORD;
            l_key BIGINT;
        BEGIN
            FOR l_app IN
                SELECT app, true AS exclusive FROM unnest(p_exclusive) AS app
                UNION ALL SELECT app, false FROM unnest(p_shared) AS app
                ORDER BY 1
            LOOP
                IF l_app.exclusive THEN
                    PERFORM pg_advisory_xact_lock(1735393282, hashtext(l_app.app));
                ELSE
                    PERFORM pg_advisory_xact_lock_shared(1735393282, hashtext(l_app.app));
                END IF;
            END LOOP;
            FOREACH l_key IN ARRAY p_keys LOOP
                PERFORM pg_advisory_xact_lock(l_key);
            END LOOP;
        END $$;
        """

    /// The tables written on every send, join or creation, whose foreign key to `groups` v12 drops.
    static let appendedTables = ["members", "group_events", "group_messages", "message_mentions", "joined_changes", "member_tombstones"]

    /// v12: fewer checks per written row.
    ///
    /// - The foreign keys from ``appendedTables`` to `groups` go. Each was a check per inserted
    ///   row (`SELECT 1 FROM ONLY groups … FOR KEY SHARE`, 14 µs a row measured in bulk, two per
    ///   send and three per join) that cannot fail: a group row is never deleted (a dismissal
    ///   marks it), and every such row is written with the key of a group its batch read and
    ///   locked. Their `ON DELETE CASCADE` never ran for the same reason. The other tables keep
    ///   theirs (`member_custom`'s to `members` deletes a leaving member's custom values).
    /// - `joined_counts` is kept by statement-level triggers: one statement per insert or delete
    ///   of members (the rows of the statement read from its transition table, counted per user,
    ///   in user order) instead of a PL/pgSQL call with two statements per member row. The counts
    ///   are those the row triggers kept: the same rows counted against the same group rows.
    static let v12 = """
        DO $$
        DECLARE
            l_constraint RECORD;
        BEGIN
            FOR l_constraint IN
                SELECT c.conrelid::regclass AS relation, c.conname AS name FROM pg_constraint c
                WHERE c.contype = 'f' AND c.confrelid = 'groups'::regclass
                  AND c.conrelid::regclass::text = ANY (ARRAY['\(appendedTables.joined(separator: "', '"))'])
            LOOP
                EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', l_constraint.relation, l_constraint.name);
            END LOOP;
        END $$;
        DROP TRIGGER members_joined_count ON members;
        DROP FUNCTION groupd_member_counted();
        CREATE FUNCTION groupd_members_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO joined_counts AS c (app_id, user_id, count)
                SELECT n.app_id, n.user_id, count(*) FROM inserted n
                JOIN groups g ON g.app_id = n.app_id AND g.group_key = n.group_key
                WHERE g.type <> 'AVChatRoom' AND g.dismissed_at IS NULL
                GROUP BY n.app_id, n.user_id ORDER BY n.app_id, n.user_id
                ON CONFLICT (app_id, user_id) DO UPDATE SET count = c.count + excluded.count;
            RETURN NULL;
        END $$;
        CREATE TRIGGER members_joined_count_insert AFTER INSERT ON members
            REFERENCING NEW TABLE AS inserted
            FOR EACH STATEMENT EXECUTE FUNCTION groupd_members_inserted();
        CREATE FUNCTION groupd_members_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE joined_counts c SET count = c.count - d.count
                FROM (SELECT o.app_id, o.user_id, count(*) AS count FROM deleted o
                      JOIN groups g ON g.app_id = o.app_id AND g.group_key = o.group_key
                      WHERE g.type <> 'AVChatRoom' AND g.dismissed_at IS NULL
                      GROUP BY o.app_id, o.user_id) d
                WHERE c.app_id = d.app_id AND c.user_id = d.user_id;
            RETURN NULL;
        END $$;
        CREATE TRIGGER members_joined_count_delete AFTER DELETE ON members
            REFERENCING OLD TABLE AS deleted
            FOR EACH STATEMENT EXECUTE FUNCTION groupd_members_deleted();
        """

    /// v13: message reactions, as SQLite's v17 keyed by app (docs/STORE.md): `reaction_counts`
    /// (one row per key of a message: its count, the next user's ordinal, the key's ordinal) and
    /// `message_reactions` (one row per user and key of a message, keyed so that a user's keys on
    /// a message are one range; `message_reactions_by_key` lists a key's users by ordinal). Text
    /// columns compare bytewise (`COLLATE "C"`), as the keys are matched exactly. No foreign key
    /// to `groups`, for v12's reason: rows are written under their group's lock, and a group row
    /// is never deleted.
    static let v13 = """
        CREATE TABLE reaction_counts (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            reaction_key TEXT COLLATE "C" NOT NULL,
            count BIGINT NOT NULL,
            next_ordinal BIGINT NOT NULL,
            key_ordinal BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_key, seq, reaction_key)
        );
        CREATE TABLE message_reactions (
            app_id TEXT NOT NULL,
            group_key BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            user_id TEXT COLLATE "C" NOT NULL,
            reaction_key TEXT COLLATE "C" NOT NULL,
            ordinal BIGINT NOT NULL,
            time BIGINT NOT NULL,
            PRIMARY KEY (app_id, group_key, seq, user_id, reaction_key)
        );
        CREATE UNIQUE INDEX message_reactions_by_key ON message_reactions (app_id, group_key, seq, reaction_key, ordinal);
        """

    /// v14: message edits (SQLite's v18): on `group_messages`, `edit_count` (0: never edited),
    /// `edited_by` and `edit_time` of the latest edit (`edit_time` NULL: never edited). An edit
    /// rewrites `text` and `payload` in place.
    static let v14 = """
        ALTER TABLE group_messages ADD COLUMN edit_count INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE group_messages ADD COLUMN edited_by TEXT;
        ALTER TABLE group_messages ADD COLUMN edit_time BIGINT;
        """

    /// v15: replies (SQLite's v19): on `group_messages`, the reference a reply holds (`reply_seq`
    /// NULL: not a reply) and its snapshot of the original (`reply_message_id`,
    /// `reply_sender_id`, `reply_type`, `reply_preview`; a NULL preview with a `reply_seq`: the
    /// original was recalled). `group_messages_by_reply` finds a message's replies, in order, for
    /// the list and for an edit or a recall of the original.
    static let v15 = """
        ALTER TABLE group_messages ADD COLUMN reply_seq BIGINT;
        ALTER TABLE group_messages ADD COLUMN reply_message_id TEXT;
        ALTER TABLE group_messages ADD COLUMN reply_sender_id TEXT;
        ALTER TABLE group_messages ADD COLUMN reply_type TEXT;
        ALTER TABLE group_messages ADD COLUMN reply_preview TEXT;
        CREATE INDEX group_messages_by_reply ON group_messages (app_id, group_key, reply_seq, seq) WHERE reply_seq IS NOT NULL;
        """

    /// v16: the `Community` group type (SQLite's v20): `groups.type`'s constraint takes one more
    /// value. Adding the new constraint checks the stored rows once (each passes, as it passed the
    /// old one), under the table's lock, in the migration's transaction.
    static let v16 = """
        ALTER TABLE groups DROP CONSTRAINT groups_type_check,
            ADD CONSTRAINT groups_type_check CHECK (type IN ('Work', 'Public', 'Meeting', 'AVChatRoom', 'Community'));
        """

    /// v17: topics of communities (SQLite's v21). A topic's row is a `groups` row (its own
    /// profile, custom fields, mute, pins and `latest_seq`; the settings, owner and member count
    /// copied from its community at creation, never read) whose `parent_key` is its community's
    /// `group_key` (`groups_by_parent` lists a community's topics in creation order).
    /// `topic_reads` holds a member's read position in a topic with the `joined_at` of the
    /// membership that wrote it: a position written before the member quit and joined again does
    /// not count (reads compare it with the membership's `joined_at`).
    static let v17 = """
        ALTER TABLE groups ADD COLUMN parent_key BIGINT;
        ALTER TABLE groups ADD FOREIGN KEY (app_id, parent_key) REFERENCES groups (app_id, group_key);
        CREATE INDEX groups_by_parent ON groups (app_id, parent_key, created_at) WHERE parent_key IS NOT NULL;
        CREATE TABLE topic_reads (
            app_id TEXT NOT NULL,
            topic_key BIGINT NOT NULL,
            user_id TEXT NOT NULL,
            last_read_seq BIGINT NOT NULL,
            joined_at BIGINT NOT NULL,
            PRIMARY KEY (app_id, topic_key, user_id),
            FOREIGN KEY (app_id, topic_key) REFERENCES groups (app_id, group_key) ON DELETE CASCADE
        );
        """

    /// v18: permission groups of communities (SQLite's v22): a community's permission groups in
    /// one text column of its row, a member's assignments in one text column of the member row
    /// (read with the group and the membership: a decision reads nothing more), and a partial
    /// index of the members who are in any permission group.
    static let v18 = """
        ALTER TABLE groups ADD COLUMN permission_groups TEXT;
        ALTER TABLE members ADD COLUMN permission_groups TEXT;
        CREATE INDEX members_in_permission_groups ON members (app_id, group_key, user_id COLLATE "C")
            WHERE permission_groups IS NOT NULL;
        """

    /// v19: private topics (SQLite's v23): `groups.is_private` (1: a private topic, seen only by
    /// the community's owner and admins and the members granted `view_topic`; 0 for every other
    /// row; BIGINT as the other flags). A constant default: the column is added without rewriting
    /// the table.
    static let v19 = """
        ALTER TABLE groups ADD COLUMN is_private BIGINT NOT NULL DEFAULT 0;
        """
}
