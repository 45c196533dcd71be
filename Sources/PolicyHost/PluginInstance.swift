import Logging
import PolicyABI

/// One plugin instance (one app, one configuration string). `instance_destroy` runs in
/// `deinit`, that is once the last chain and the last in-flight call holding it let go.
///
/// `@unchecked Sendable`: `pointer` is written once in `init`; the ABI requires `on_hook`
/// to be safe to call concurrently on one instance, and `instance_destroy` runs once, in `deinit`.
final class PluginInstance: @unchecked Sendable {
    let library: PluginLibrary
    let app: String
    private let pointer: UnsafeMutableRawPointer

    /// Call `instance_new`. - Throws: ``PolicyLoadError`` with the plugin's message.
    init(library: PluginLibrary, app: String, config: String, logger: Logger) throws(PolicyLoadError) {
        self.library = library
        self.app = app
        let state = CallState(plugin: library.name, app: app, logger: logger)
        var appCopy = app, configCopy = config
        let created: UnsafeMutableRawPointer? = appCopy.withUTF8 { appBytes in
            configCopy.withUTF8 { configBytes in
                let appStr = groupd_str(ptr: UnsafeRawPointer(appBytes.baseAddress)?.assumingMemoryBound(to: CChar.self), len: appBytes.count)
                let configStr = groupd_str(ptr: UnsafeRawPointer(configBytes.baseAddress)?.assumingMemoryBound(to: CChar.self), len: configBytes.count)
                return withExtendedLifetime(state) { library.table.instance_new!(state.opaque, appStr, configStr) }
            }
        }
        let answers = state.close()
        guard let created else {
            throw PolicyLoadError(
                code: .instanceFailed, path: library.path, app: app,
                message: answers.error?.message ?? "instance_new returned NULL without a message")
        }
        self.pointer = created
    }

    deinit {
        library.table.instance_destroy?(pointer)
    }

    /// The plugin's `after_event_position` (ABI 1.1): the last `event_id` it keeps for good;
    /// `nil` when the plugin has no such function.
    func afterEventPosition() -> Int64? {
        guard let position = library.table.after_event_position else { return nil }
        return position(pointer)
    }

    /// Call `on_hook` on the calling thread and return the raw decision.
    /// - Parameters:
    ///   - hook: The hook called, passed to the plugin as its ABI value.
    ///   - request: What the hook is shown (lent to the plugin for the call only).
    ///   - state: Where the plugin's answers through the host callbacks are recorded; passed to it as
    ///     its opaque `groupd_call *`, and kept alive until it returns.
    ///   - budget: the call's time budget, shown to the plugin as `budget_ms`.
    func onHook(_ hook: PolicyHook, request: HookRequest, state: CallState, budget: Duration = .zero) -> Int32 {
        RequestMarshal.withRequest(app: app, request, budget: budget) { request in
            withExtendedLifetime(state) {
                library.table.on_hook!(pointer, hook.abiValue, request, state.opaque)
            }
        }
    }
}
