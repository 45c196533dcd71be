import Synchronization

/// What a handler tells about its call for the observer: the caller's app and operator and the
/// stable reason of its error. One per observed call, reached from ``ServerContext/annotations``.
public final class CallAnnotations: Sendable {
    /// The values, set by the handler's task and read on the event loop when the call ends.
    public struct Values: Sendable, Equatable {
        /// The caller's app, once authenticated.
        public var app: String?
        /// The user the call acts as (`nil`: the app's backend, or not authenticated).
        public var operatorID: String?
        /// The stable reason of the call's error (the `ErrorInfo.reason` sent to the client).
        public var reason: String?

        /// No value.
        public init(app: String? = nil, operatorID: String? = nil, reason: String? = nil) {
            self.app = app
            self.operatorID = operatorID
            self.reason = reason
        }
    }

    /// Inline in the object: one allocation per observed call.
    private let box = Mutex(Values())

    /// Creates empty annotations.
    public init() {}

    /// The values set so far.
    public var values: Values { box.withLock { $0 } }

    /// Records the authenticated caller.
    public func setCaller(app: String, operatorID: String?) {
        box.withLock {
            $0.app = app
            $0.operatorID = operatorID
        }
    }

    /// Records the stable reason of the call's error.
    public func setReason(_ reason: String) {
        box.withLock { $0.reason = reason }
    }
}
