/// Why bytes could not be decoded as a protobuf message.
///
/// Decoding never traps on bad input: protobuf-c refuses it (truncated varint, wrong wire type for
/// a known field, length past the end, ...) or a string field fails UTF-8 validation, and the
/// decoder throws this error.
public struct ProtoDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of decoding failure; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case malformed
            case invalidUTF8
        }

        private let wrapped: Wrapped

        private init(_ wrapped: Wrapped) {
            self.wrapped = wrapped
        }

        /// protobuf-c could not parse the bytes as the message (not a valid encoding).
        public static let malformed = Code(.malformed)

        /// A `string` field holds bytes that are not UTF-8 (proto3 requires UTF-8).
        public static let invalidUTF8 = Code(.invalidUTF8)

        /// A short name of the code.
        public var description: String {
            switch wrapped {
            case .malformed: "malformed"
            case .invalidUTF8: "invalidUTF8"
            }
        }
    }

    /// The kind of failure.
    public var code: Code

    /// The full protobuf name of the message being decoded, or of the field whose string was not
    /// UTF-8 (`groupd.v1.Group.group_id`).
    public var subject: String

    /// A developer-facing explanation.
    public var message: String

    /// Makes an error.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - subject: The message or field concerned.
    ///   - message: A developer-facing explanation.
    public init(code: Code, subject: String, message: String) {
        self.code = code
        self.subject = subject
        self.message = message
    }

    /// `"<code>: <message>"`.
    public var description: String {
        "\(code): \(message)"
    }
}
