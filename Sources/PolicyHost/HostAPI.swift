import Logging
import PolicyABI
import NIOConcurrencyHelpers

/// The answers a plugin gave through the host callbacks during one call (or one `instance_new`).
///
/// The C side sees it as an opaque `groupd_call *`: an unretained `Unmanaged` pointer, valid
/// because the work item that calls the plugin holds a strong reference until the plugin returns.
final class CallState: Sendable {
    struct Answers: Sendable {
        var rejectedFields: [(key: String, reason: String)] = []
        var rejectedMembers: [(user: String, reason: String)] = []
        var changes: [(key: String, value: String?)] = []
        var error: (code: Int32, message: String)?
        /// Set once the host stopped listening (the call finished or timed out): later answers are dropped.
        var closed = false
    }

    let plugin: String
    let app: String
    let logger: Logger
    private let answers = NIOLockedValueBox(Answers())

    init(plugin: String, app: String, logger: Logger) {
        self.plugin = plugin
        self.app = app
        self.logger = logger
    }

    func record(_ body: (inout Answers) -> Void) {
        answers.withLockedValue { answers in
            guard !answers.closed else { return }
            body(&answers)
        }
    }

    /// Stop recording and return what was recorded.
    func close() -> Answers {
        answers.withLockedValue { answers in
            answers.closed = true
            return answers
        }
    }

    var opaque: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(self).toOpaque()) }

    static func from(_ call: OpaquePointer?) -> CallState? {
        guard let call else { return nil }
        return Unmanaged<CallState>.fromOpaque(UnsafeRawPointer(call)).takeUnretainedValue()
    }
}

extension String {
    /// Copy a borrowed `groupd_str` (invalid UTF-8 is repaired, never trusted).
    init(_ str: groupd_str) {
        guard let pointer = str.ptr, str.len > 0 else {
            self = ""
            return
        }
        self = String(decoding: UnsafeRawBufferPointer(start: pointer, count: str.len), as: UTF8.self)
    }
}

/// The host function table given to every plugin: non-capturing trampolines over `CallState`.
enum HostAPI {
    /// Allocated once and never freed: plugins may keep the pointer for the life of the process.
    nonisolated(unsafe) static let table: UnsafePointer<groupd_host_api> = {
        let table = UnsafeMutablePointer<groupd_host_api>.allocate(capacity: 1)
        table.initialize(to: groupd_host_api(
            struct_size: UInt32(MemoryLayout<groupd_host_api>.size),
            abi_major: UInt32(GROUPD_POLICY_ABI_MAJOR),
            abi_minor: UInt32(GROUPD_POLICY_ABI_MINOR),
            reject_field: { call, key, reason in
                CallState.from(call)?.record { $0.rejectedFields.append((String(key), String(reason))) }
            },
            reject_member: { call, user, reason in
                CallState.from(call)?.record { $0.rejectedMembers.append((String(user), String(reason))) }
            },
            rewrite: { call, key, value in
                CallState.from(call)?.record { $0.changes.append((String(key), String(value))) }
            },
            remove_field: { call, key in
                CallState.from(call)?.record { $0.changes.append((String(key), nil)) }
            },
            set_error: { call, code, message in
                CallState.from(call)?.record { $0.error = (code, String(message)) }
            },
            log: { call, level, message in
                guard let state = CallState.from(call) else { return }
                let text = String(message)
                let metadata: Logger.Metadata = ["plugin": "\(state.plugin)", "app": "\(state.app)"]
                switch level {
                case Int32(GROUPD_LOG_DEBUG.rawValue): state.logger.debug("\(text)", metadata: metadata)
                case Int32(GROUPD_LOG_INFO.rawValue): state.logger.info("\(text)", metadata: metadata)
                case Int32(GROUPD_LOG_WARNING.rawValue): state.logger.warning("\(text)", metadata: metadata)
                default: state.logger.error("\(text)", metadata: metadata)
                }
            }
        ))
        return UnsafePointer(table)
    }()
}

/// Copies a ``HookRequest`` into one byte arena and lends it to C as a `groupd_request`.
enum RequestMarshal {
    /// - Parameters:
    ///   - app: The app whose chain runs, lent to the plugin as `app_id`.
    ///   - request: What the hook is shown, copied into the arena.
    ///   - budget: the call's time budget, lent to the plugin as `budget_ms`.
    ///   - body: Runs with the `groupd_request`, valid only until it returns; its result is returned.
    static func withRequest<R>(app: String, _ request: HookRequest, budget: Duration = .zero, _ body: (UnsafePointer<groupd_request>) -> R) -> R {
        var bytes: [UInt8] = []
        func add(_ string: String) -> Range<Int> {
            let start = bytes.count
            bytes.append(contentsOf: string.utf8)
            return start..<bytes.count
        }
        let appRange = add(app), operatorRange = add(request.operatorID), groupRange = add(request.groupID)
        let typeRange = add(request.groupType), roleRange = add(request.readerRole), eventRange = add(request.eventType)
        let fieldRanges = request.fields.map { (add($0.key), add($0.value)) }
        let userRanges = request.users.map { add($0) }
        bytes.append(0)  // never empty, so every groupd_str has a non-NULL pointer

        return bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            func str(_ range: Range<Int>) -> groupd_str { groupd_str(ptr: base + range.lowerBound, len: range.count) }
            let fields = fieldRanges.map { groupd_field(key: str($0.0), value: str($0.1)) }
            let users = userRanges.map { str($0) }
            return fields.withUnsafeBufferPointer { fieldBuffer in
                users.withUnsafeBufferPointer { userBuffer in
                    var request = groupd_request(
                        struct_size: MemoryLayout<groupd_request>.size,
                        app_id: str(appRange), operator_id: str(operatorRange), group_id: str(groupRange),
                        group_type: str(typeRange), reader_role: str(roleRange), event_type: str(eventRange),
                        fields: fieldBuffer.baseAddress, field_count: fieldBuffer.count,
                        users: userBuffer.baseAddress, user_count: userBuffer.count,
                        budget_ms: budget.components.seconds * 1000 + budget.components.attoseconds / 1_000_000_000_000_000,
                        event_id: request.eventID, group_sequence: request.groupSequence,
                        event_time_ms: request.eventTimeMilliseconds)
                    return withUnsafePointer(to: &request) { body($0) }
                }
            }
        }
    }
}
