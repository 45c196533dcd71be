/// Why JSON text could not be decoded as a protobuf message (``ProtoJSON/decode(json:messageName:)-(UnsafeRawBufferPointer,_)``).
///
/// The decoder is strict: it refuses what proto3 JSON does not define (an unknown key, a number
/// where a string belongs, a fractional `int32`, two members of one oneof) instead of ignoring it.
public struct ProtoJSONError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of decoding failure; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Wrapped: Hashable, Sendable {
            case syntax
            case unknownField
            case wrongType
            case duplicateField
            case unknownMessage
        }

        private let wrapped: Wrapped

        private init(_ wrapped: Wrapped) {
            self.wrapped = wrapped
        }

        /// The text is not JSON (RFC 8259): a malformed token, invalid UTF-8, a lone surrogate
        /// escape, nesting deeper than ``ProtoJSON/maximumDepth``, data after the top-level value,
        /// or a top-level value that is not an object.
        public static let syntax = Code(.syntax)

        /// An object key names no field of the message.
        public static let unknownField = Code(.unknownField)

        /// A value does not fit its field: the wrong JSON type, an integer out of range or with a
        /// fraction, an unknown enum value name, bad base64, a malformed `Timestamp`, `Duration` or
        /// `FieldMask`.
        public static let wrongType = Code(.wrongType)

        /// A field is given twice (also under its two names, `groupId` and `group_id`), a map key
        /// twice, or two members of one oneof are set.
        public static let duplicateField = Code(.duplicateField)

        /// The message name, or the `@type` of an `Any`, names no message this build knows.
        public static let unknownMessage = Code(.unknownMessage)

        /// A short name of the code.
        public var description: String {
            switch wrapped {
            case .syntax: "syntax"
            case .unknownField: "unknownField"
            case .wrongType: "wrongType"
            case .duplicateField: "duplicateField"
            case .unknownMessage: "unknownMessage"
            }
        }
    }

    /// The kind of failure.
    public var code: Code

    /// Where the failure is, in proto field names: `members[2].user_id`, `custom["k"]` for a map
    /// value, the unknown key itself as the last component for ``Code/unknownField``; empty when
    /// the failure is at the top level (a syntax error there, an unknown message name).
    public var field: String

    /// A developer-facing explanation, e.g. `field profile.name: expected a string, got a number`.
    public var message: String

    /// Makes an error.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - field: The path of the field at fault.
    ///   - message: A developer-facing explanation.
    public init(code: Code, field: String, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    /// `"<code>: <message>"`.
    public var description: String {
        "\(code): \(message)"
    }
}
