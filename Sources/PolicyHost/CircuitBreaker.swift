/// A circuit breaker as a value-type state machine: closed → (threshold consecutive failures)
/// → open for `cooldown` → half-open (one failure re-opens it, one success closes it).
struct CircuitBreaker: Sendable {
    enum State: Sendable, Equatable {
        case closed(consecutiveFailures: Int)
        case open(until: ContinuousClock.Instant)
        case halfOpen
    }

    let threshold: Int
    let cooldown: Duration
    private(set) var state: State = .closed(consecutiveFailures: 0)

    init(threshold: Int, cooldown: Duration) {
        self.threshold = max(1, threshold)
        self.cooldown = cooldown
    }

    /// Whether a call may go to the plugin now.
    mutating func permitsCall(now: ContinuousClock.Instant) -> Bool {
        switch state {
        case .closed, .halfOpen:
            return true
        case .open(let until):
            guard now >= until else { return false }
            state = .halfOpen
            return true
        }
    }

    /// Record a call that gave a decision.
    mutating func recordSuccess() {
        state = .closed(consecutiveFailures: 0)
    }

    /// Record a failed call. - Returns: `true` when this failure tripped the breaker.
    mutating func recordFailure(now: ContinuousClock.Instant) -> Bool {
        switch state {
        case .closed(let failures):
            if failures + 1 >= threshold {
                state = .open(until: now.advanced(by: cooldown))
                return true
            }
            state = .closed(consecutiveFailures: failures + 1)
            return false
        case .halfOpen:
            state = .open(until: now.advanced(by: cooldown))
            return true
        case .open:
            return false
        }
    }
}
