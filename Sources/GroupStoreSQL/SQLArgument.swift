/// A value bound to a statement parameter.
package enum SQLArgument {
    case integer(Int64)
    case text(String)
    case blob([UInt8])
    case null

    /// `value` as an integer.
    package static func int(_ value: Int) -> SQLArgument { .integer(Int64(value)) }
    /// A boolean as 0 or 1.
    package static func bool(_ value: Bool) -> SQLArgument { .integer(value ? 1 : 0) }
    /// An optional text (NULL when absent).
    package static func text(_ value: String?) -> SQLArgument { value.map { .text($0) } ?? .null }
    /// An optional integer (NULL when absent).
    package static func integer(_ value: Int64?) -> SQLArgument { value.map { .integer($0) } ?? .null }
}
