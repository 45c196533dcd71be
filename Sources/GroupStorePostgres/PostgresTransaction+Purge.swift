import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL

/// Retention: old events, old messages with their mentions, old member tombstones, of one app.
extension PostgresTransaction {
    func purge(_ request: PurgeRequest) async throws -> Int {
        try await flushSends()
        try await flushHeld()
        sends.forget(.app(request.app))
        let cutoff = request.before.millisecondsSince1970
        switch request.kind {
        case .events:
            return try await session.execute(
                """
                DELETE FROM group_events WHERE app_id = ? AND event_id IN (
                    SELECT event_id FROM group_events
                    WHERE app_id = ? AND time < ? AND kind <> 'GROUP_MESSAGE'
                    ORDER BY event_id LIMIT ?)
                """, [.text(request.app), .text(request.app), .integer(cutoff), .int(request.limit)])
        case .messages:
            var ids: [Int64] = []
            var groupKeys: [Int64] = []
            var sequences: [Int64] = []
            try await session.rows(
                """
                SELECT event_id, group_key, seq FROM group_events
                WHERE app_id = ? AND time < ? AND kind = 'GROUP_MESSAGE' LIMIT ?
                """, [.text(request.app), .integer(cutoff), .int(request.limit)]
            ) { row in
                ids.append(try row.int64(0))
                groupKeys.append(try row.int64(1))
                sequences.append(try row.int64(2))
            }
            if ids.isEmpty { return 0 }
            // Bodies are keyed by group and sequence, as their event is.
            let bodies: [PGValue] = [.text(request.app), .integers(groupKeys), .integers(sequences)]
            try await session.execute(
                """
                DELETE FROM message_mentions mm USING unnest(?::int8[], ?::int8[]) AS m(group_key, seq)
                WHERE mm.app_id = ? AND mm.group_key = m.group_key AND mm.seq = m.seq
                """, [.integers(groupKeys), .integers(sequences), .text(request.app)])
            for table in ["message_reactions", "reaction_counts"] {
                try await session.execute(
                    """
                    DELETE FROM \(table) r USING unnest(?::int8[], ?::int8[]) AS m(group_key, seq)
                    WHERE r.app_id = ? AND r.group_key = m.group_key AND r.seq = m.seq
                    """, [.integers(groupKeys), .integers(sequences), .text(request.app)])
            }
            try await session.execute(
                """
                DELETE FROM group_messages gm USING unnest(?::int8[], ?::int8[]) AS m(group_key, seq)
                WHERE gm.app_id = ? AND gm.group_key = m.group_key AND gm.seq = m.seq
                """, Array(bodies[1...]) + [bodies[0]])
            try await session.execute(
                "DELETE FROM group_events WHERE app_id = ? AND event_id = ANY(?)", [.text(request.app), .integers(ids)])
            return ids.count
        case .memberTombstones:
            return try await purgeTombstones(app: request.app, before: cutoff, limit: request.limit)
        }
    }
}
