import PolicyABI
import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a plugin could not be loaded or instantiated.
public struct PolicyLoadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kinds of load failure.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private enum Wrapped: String, Sendable, Hashable {
            case openFailed = "open_failed"
            case missingEntrySymbol = "missing_entry_symbol"
            case noTable = "no_table"
            case tableTooSmall = "table_too_small"
            case majorVersionMismatch = "major_version_mismatch"
            case incompleteTable = "incomplete_table"
            case instanceFailed = "instance_failed"
        }
        private let wrapped: Wrapped
        private init(_ wrapped: Wrapped) { self.wrapped = wrapped }

        /// `dlopen` failed (no such file, missing dependency, wrong architecture).
        public static let openFailed = Code(.openFailed)
        /// The library does not export `groupd_policy_entry_v1`.
        public static let missingEntrySymbol = Code(.missingEntrySymbol)
        /// The entry returned NULL.
        public static let noTable = Code(.noTable)
        /// The plugin table's `struct_size` is below the v1 minimum.
        public static let tableTooSmall = Code(.tableTooSmall)
        /// The plugin table's `abi_major` is not this host's.
        public static let majorVersionMismatch = Code(.majorVersionMismatch)
        /// A required function (`instance_new`, `on_hook`) is NULL.
        public static let incompleteTable = Code(.incompleteTable)
        /// `instance_new` returned NULL; the message is the plugin's.
        public static let instanceFailed = Code(.instanceFailed)

        /// The code's name.
        public var description: String { wrapped.rawValue }
    }

    /// What went wrong.
    public var code: Code
    /// The plugin's path.
    public var path: String
    /// Which app's chain was being built (empty while loading the library itself).
    public var app: String
    /// What went wrong, for a log line or an operator.
    public var message: String

    /// `path (app): code: message`.
    public var description: String {
        "policy plugin \(path)\(app.isEmpty ? "" : " for app \(app)"): \(code): \(message)"
    }
}

/// A loaded plugin library: its validated function table. Never unloaded.
final class PluginLibrary: Sendable {
    let path: String
    let name: String
    /// The plugin's table copied into a host-sized struct (zero past the plugin's `struct_size`).
    private let tableBox: TableBox

    /// `@unchecked Sendable`: the table is written once in `init` and only read afterwards.
    private final class TableBox: @unchecked Sendable {
        let table: groupd_plugin_api
        init(_ table: groupd_plugin_api) { self.table = table }
    }

    var table: groupd_plugin_api { tableBox.table }

    /// Open and validate the library at `path`. - Throws: ``PolicyLoadError``.
    init(path: String) throws(PolicyLoadError) {
        self.path = path
        // RTLD_LOCAL keeps one plugin's symbols from satisfying another's; RTLD_NOW makes a
        // missing dependency fail here, at load, and not in the middle of an RPC.
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown dlopen error"
            throw PolicyLoadError(code: .openFailed, path: path, app: "", message: reason)
        }
        guard let symbol = dlsym(handle, GROUPD_POLICY_ENTRY_SYMBOL) else {
            var message = "the library does not export \(GROUPD_POLICY_ENTRY_SYMBOL)"
            for major in 2...9 where dlsym(handle, "groupd_policy_entry_v\(major)") != nil {
                message += " (it exports groupd_policy_entry_v\(major): built for ABI major \(major), this host speaks \(GROUPD_POLICY_ABI_MAJOR))"
            }
            throw PolicyLoadError(code: .missingEntrySymbol, path: path, app: "", message: message)
        }
        let entry = unsafeBitCast(symbol, to: groupd_policy_entry_fn.self)
        guard let raw = entry(HostAPI.table) else {
            throw PolicyLoadError(code: .noTable, path: path, app: "", message: "\(GROUPD_POLICY_ENTRY_SYMBOL) returned NULL")
        }
        // Read the leading fields by offset before trusting the plugin's size.
        let base = UnsafeRawPointer(raw)
        let size = Int(base.load(as: UInt32.self))
        let minimum = PluginLibrary.minimumTableSize
        guard size >= minimum else {
            throw PolicyLoadError(
                code: .tableTooSmall, path: path, app: "",
                message: "plugin table struct_size is \(size) bytes, ABI v1 needs at least \(minimum)")
        }
        let major = base.load(fromByteOffset: MemoryLayout<groupd_plugin_api>.offset(of: \.abi_major)!, as: UInt32.self)
        guard major == UInt32(GROUPD_POLICY_ABI_MAJOR) else {
            throw PolicyLoadError(
                code: .majorVersionMismatch, path: path, app: "",
                message: "plugin speaks ABI major \(major), this host speaks \(GROUPD_POLICY_ABI_MAJOR)")
        }
        // Copy what the plugin has; fields it was built without stay zero (NULL).
        var table = groupd_plugin_api()
        withUnsafeMutableBytes(of: &table) { destination in
            destination.copyMemory(from: UnsafeRawBufferPointer(start: base, count: min(size, destination.count)))
        }
        guard table.instance_new != nil, table.on_hook != nil else {
            throw PolicyLoadError(code: .incompleteTable, path: path, app: "", message: "instance_new and on_hook must not be NULL")
        }
        self.name = table.name.map { String(cString: $0) } ?? path
        self.tableBox = TableBox(table)
    }

    /// The smallest v1 table: up to and including `on_hook`.
    static var minimumTableSize: Int {
        MemoryLayout<groupd_plugin_api>.offset(of: \.on_hook)! + MemoryLayout<UnsafeRawPointer>.size
    }
}

/// Loaded libraries by path, for the whole process: a library is opened, and its entry
/// called, exactly once, under the lock (plugins store the host table in a plain global
/// from their entry, so two concurrent entry calls would race). Never closed.
final class PluginLibraryCache: Sendable {
    static let shared = PluginLibraryCache()

    private let libraries = NIOLockedValueBox<[String: PluginLibrary]>([:])

    func library(at path: String) throws(PolicyLoadError) -> PluginLibrary {
        try libraries.withLockedValue { libraries -> Result<PluginLibrary, PolicyLoadError> in
            if let library = libraries[path] { return .success(library) }
            do throws(PolicyLoadError) {
                let library = try PluginLibrary(path: path)
                libraries[path] = library
                return .success(library)
            } catch {
                return .failure(error)
            }
        }.get()
    }
}
