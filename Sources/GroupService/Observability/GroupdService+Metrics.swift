import GRPCProtocol
import GroupStore
import PolicyHost
import Synchronization

extension GroupdService {
    /// Feeds `metrics` from the store's batches and the policy plugins' calls, and sets the
    /// gauges read at each scrape: the event streams, the plugins' breakers, the configuration
    /// generation, the store library's memory.
    func instrument(_ metrics: GroupdMetrics) {
        store.observeCommitBatches { mutations, duration in
            metrics.storeCommitted(mutations: mutations, duration: duration)
        }
        policy.host?.observeCalls { plugin, hook, duration in
            metrics.pluginCalled(plugin: plugin, hook: hook.rawValue, duration: duration)
        }
        metrics.addCollector { [weak self] gauges in
            guard let self else { return }
            gauges.set("groupd_config_generation", to: Double(self.snapshot.generation))
            let streams = self.events.subscriberStatistics()
            gauges.set("groupd_event_subscribers", to: Double(streams.subscribers))
            gauges.set("groupd_event_subscriber_queued_messages", to: Double(streams.queuedMessages))
            gauges.set("groupd_event_subscriber_queue_depth_max", to: Double(streams.deepestQueue))
            if let bytes = self.store.libraryMemoryBytes { gauges.set("groupd_store_library_memory_bytes", to: Double(bytes)) }
            for breaker in self.policy.host?.breakerStates() ?? [] {
                gauges.set(
                    "groupd_policy_circuit_breaker_state", [("app", breaker.app), ("plugin", breaker.plugin)],
                    to: Double(breaker.state.rawValue))
            }
        }
    }
}

extension EventHub {
    /// The `Subscribe` streams registered and the messages waiting in their queues.
    public struct SubscriberStatistics: Sendable, Hashable {
        /// Streams registered.
        public var subscribers: Int
        /// Messages queued to those streams and not yet sent, all together.
        public var queuedMessages: Int
        /// The most messages queued to one stream.
        public var deepestQueue: Int
    }

    /// The streams and their queues now (the hub's lock is held only to list the streams).
    public func subscriberStatistics() -> SubscriberStatistics {
        let writers = state.withLock { $0.routes.values.map(\.subscriber.writer) }
        var statistics = SubscriberStatistics(subscribers: writers.count, queuedMessages: 0, deepestQueue: 0)
        for writer in writers {
            let queued = writer.queuedCount
            statistics.queuedMessages += queued
            statistics.deepestQueue = max(statistics.deepestQueue, queued)
        }
        return statistics
    }
}
