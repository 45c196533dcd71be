/// One static file of the operator console (docs/CONSOLE.md), embedded in the binary: what the
/// console listener answers a `GET` of its path with.
///
/// The files are written in `Assets/` and compiled in by `scripts/genconsole.py`
/// (`ConsoleAssets.swift`, committed).
public struct ConsoleFile: Sendable {
    /// The `Content-Type` it is served with (`text/html; charset=utf-8`, …).
    public let contentType: String
    /// Its strong ETag, quoted: the first 16 hex digits of the SHA-256 of its bytes.
    public let etag: String
    /// Its bytes.
    public let body: [UInt8]

    init(contentType: String, etag: String, text: String) {
        self.contentType = contentType
        self.etag = etag
        self.body = Array(text.utf8)
    }

    /// The file served at a request path: `/` is `/index.html`; a query is not part of `path`.
    /// - Parameter path: The request target's path, starting with `/`.
    /// - Returns: The file, or nil when the console has none at that path.
    public static func file(at path: String) -> ConsoleFile? {
        all[path == "/" ? "/index.html" : path]
    }

    /// The paths of every embedded file.
    public static var paths: [String] { all.keys.sorted() }
}
