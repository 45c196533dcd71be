import GroupModel

/// A position in an app's event stream, as the opaque `cursor` strings of `Subscribe` carry it:
/// `"1."` (the format version), the `group_events.event_id` to resume after, `"."`, and the time
/// (ms) of that event. The time makes expiry a comparison with the retention cutoff, whether or
/// not the purge has run yet.
struct EventCursor: Sendable, Hashable {
    /// Resume after this `event_id`.
    var eventID: Int64
    /// The time of the event at `eventID` (or when the position was taken if there was none).
    var time: Timestamp

    /// The current format's prefix.
    static let versionPrefix = "1."

    /// The cursor string.
    var encoded: String {
        "\(Self.versionPrefix)\(eventID).\(time.millisecondsSince1970)"
    }

    /// Parses a cursor string.
    /// - Throws: `INVALID_ARGUMENT` naming `cursor` when it is not one this server wrote.
    init(parsing text: String) throws {
        let invalid = GroupError.invalidArgument(field: "cursor", "malformed cursor")
        guard text.hasPrefix(Self.versionPrefix), text.utf8.count <= 48 else { throw invalid }
        let parts = text.dropFirst(Self.versionPrefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let eventID = Int64(parts[0]), let time = Int64(parts[1])
        else { throw invalid }
        self.eventID = eventID
        self.time = Timestamp(millisecondsSince1970: time)
    }

    /// A cursor at a position.
    init(eventID: Int64, time: Timestamp) {
        self.eventID = eventID
        self.time = time
    }
}
