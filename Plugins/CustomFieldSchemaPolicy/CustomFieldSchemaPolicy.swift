#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PolicyABI

/// Written by the entry before any instance exists; every write stores the same pointer.
nonisolated(unsafe) private var host: UnsafePointer<groupd_host_api>?

extension String {
    fileprivate init(_ str: groupd_str) {
        guard let pointer = str.ptr, str.len > 0 else {
            self = ""
            return
        }
        self = String(decoding: UnsafeRawBufferPointer(start: pointer, count: str.len), as: UTF8.self)
    }

    fileprivate func withGroupdStr<R>(_ body: (groupd_str) -> R) -> R {
        var copy = self
        return copy.withUTF8 { bytes in
            body(groupd_str(ptr: UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self), len: bytes.count))
        }
    }
}

private func decision(_ value: groupd_decision) -> Int32 { Int32(value.rawValue) }

private func onHook(_ schema: FieldSchema, hook: Int32, request: UnsafePointer<groupd_request>, call: OpaquePointer?, host: UnsafePointer<groupd_host_api>) -> Int32 {
    let fields = UnsafeBufferPointer(start: request.pointee.fields, count: request.pointee.field_count)
    if hook == Int32(GROUPD_HOOK_FILTER_CUSTOM_ON_READ.rawValue) {
        let role = Role(rawValue: String(request.pointee.reader_role)) ?? .none
        var removed = false
        for field in fields where !schema.readable(key: String(field.key), by: role) {
            host.pointee.remove_field(call, field.key)
            removed = true
        }
        return decision(removed ? GROUPD_DECISION_REWRITE : GROUPD_DECISION_ALLOW)
    }
    if hook == Int32(GROUPD_HOOK_AFTER_EVENT.rawValue) { return decision(GROUPD_DECISION_ALLOW) }
    var rejected = false, rewritten = false
    for field in fields {
        let key = String(field.key)
        guard FieldSchema.isCustom(key) else { continue }
        switch schema.validate(key: key, value: String(field.value)) {
        case .valid:
            continue
        case .normalized(let value):
            value.withGroupdStr { host.pointee.rewrite(call, field.key, $0) }
            rewritten = true
        case .invalid(let reason):
            reason.withGroupdStr { host.pointee.reject_field(call, field.key, $0) }
            rejected = true
        }
    }
    if rejected { return decision(GROUPD_DECISION_REJECT) }
    return decision(rewritten ? GROUPD_DECISION_REWRITE : GROUPD_DECISION_ALLOW)
}

/// Initialised once (Swift globals are lazily initialised exactly once) and only read afterwards.
nonisolated(unsafe) private let pluginTable: UnsafeMutablePointer<groupd_plugin_api> = {
    let table = UnsafeMutablePointer<groupd_plugin_api>.allocate(capacity: 1)
    table.initialize(to: groupd_plugin_api(
        struct_size: UInt32(MemoryLayout<groupd_plugin_api>.size),
        abi_major: UInt32(GROUPD_POLICY_ABI_MAJOR),
        abi_minor: UInt32(GROUPD_POLICY_ABI_MINOR),
        name: UnsafeRawPointer(("custom-field-schema" as StaticString).utf8Start).assumingMemoryBound(to: CChar.self),
        instance_new: { call, _, config in
            // No Swift error may cross the C frame: every failure becomes set_error + NULL.
            do {
                let configuration = try JSONDecoder().decode(SchemaConfiguration.self, from: Data(String(config).utf8))
                return Unmanaged.passRetained(try FieldSchema(configuration)).toOpaque()
            } catch let error as SchemaError {
                "custom-field-schema: \(error.message)".withGroupdStr { host?.pointee.set_error(call, 1, $0) }
            } catch {
                "custom-field-schema: bad config: \(error)".withGroupdStr { host?.pointee.set_error(call, 1, $0) }
            }
            return nil
        },
        instance_destroy: { instance in
            guard let instance else { return }
            Unmanaged<FieldSchema>.fromOpaque(instance).release()
        },
        on_hook: { instance, hook, request, call in
            guard let instance, let request, let host else { return Int32(GROUPD_DECISION_ERROR.rawValue) }
            return onHook(Unmanaged<FieldSchema>.fromOpaque(instance).takeUnretainedValue(), hook: hook, request: request, call: call, host: host)
        },
        after_event_position: nil  // keeps no after-events
    ))
    return table
}()

/// The plugin's entry: check the host, remember its table, return ours.
@_cdecl("groupd_policy_entry_v1")
public func groupdPolicyEntryV1(_ hostTable: UnsafePointer<groupd_host_api>?) -> UnsafePointer<groupd_plugin_api>? {
    guard let hostTable, hostTable.pointee.abi_major == UInt32(GROUPD_POLICY_ABI_MAJOR),
          Int(hostTable.pointee.struct_size) >= MemoryLayout<groupd_host_api>.size
    else { return nil }
    host = hostTable
    return UnsafePointer(pluginTable)
}
