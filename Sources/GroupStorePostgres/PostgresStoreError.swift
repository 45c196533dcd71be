import Foundation
import GroupModel
import GroupStore
import GroupStoreSQL
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Failures of the PostgreSQL store that are not the caller's mistake.
enum PostgresStoreError: StoreFailure, CustomStringConvertible {
    /// The database cannot be reached (connect failed, connection lost, in back-off).
    case unavailable(String, cause: (any Error)?)
    /// A statement ran past `statement_timeout`.
    case timedOut(any Error)
    /// Every connection of the pool is busy and too many calls wait already.
    case poolExhausted(Int)
    /// COMMIT found the transaction failed and rolled it back.
    case rolledBack
    /// Rows the batch held in memory until one statement writes them all (its sends' bodies, the
    /// rows of its creations, joins and group updates) were refused: the batch fails as a whole
    /// (they belong to earlier mutations of it).
    case heldRowsRefused(any Error)

    var description: String {
        switch self {
        case .unavailable(let message, _): message
        case .timedOut(let error): "a PostgreSQL statement ran past statement_timeout: \(String(reflecting: error))"
        case .poolExhausted(let waiting): "every PostgreSQL connection is busy and \(waiting) calls wait already"
        case .rolledBack: "PostgreSQL rolled the transaction back"
        case .heldRowsRefused(let error): "PostgreSQL refused rows the batch held for its last statements: \(String(reflecting: error))"
        }
    }

    /// The error `Store` hands to callers.
    var groupError: GroupError {
        switch self {
        case .unavailable(let message, _):
            GroupError(code: .unavailable, reason: .storeUnavailable, message: message)
        case .timedOut:
            GroupError(code: .unavailable, reason: .storeTimeout, message: description)
        case .poolExhausted:
            GroupError(code: .resourceExhausted, reason: .storeBusy, message: description)
        case .rolledBack:
            GroupError(code: .aborted, reason: .internal, message: description)
        case .heldRowsRefused:
            GroupError(code: .internal, reason: .internal, message: description)
        }
    }
}

extension GroupError.Reason {
    /// The database cannot be reached; retry later or on another node.
    public static let storeUnavailable: Self = "STORE_UNAVAILABLE"
    /// A database statement ran past the configured statement timeout.
    public static let storeTimeout: Self = "STORE_TIMEOUT"
    /// Every database connection is busy and the wait queue is full.
    public static let storeBusy: Self = "STORE_BUSY"
}
