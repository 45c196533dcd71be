import FuzzSupport
import GroupAPI

/// Every method's request type (and response type) decoded from arbitrary text as proto3 JSON,
/// as a Connect call's JSON body is (`ProtoJSON.decode`). What decodes is wire bytes protobuf-c
/// takes as the message; the message's own JSON decodes again to an equal message.
///
/// Input: byte 0 picks the type — `allMethods[byte / 2]`, its request when even, its response
/// when odd (modulo the number of methods) — the rest is the JSON text.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSON(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 1 else { return 0 }
    let method = allMethods[Int(input[0] / 2) % allMethods.count]
    let type = input[0] % 2 == 0 ? method.requestType : method.responseType
    check(type, UnsafeRawBufferPointer(rebasing: input[1...]))
    return 0
}

func check<Message: ProtoMessage>(_ type: Message.Type, _ json: UnsafeRawBufferPointer) {
    let name = Message.protoMessageName
    guard let bytes = try? ProtoJSON.decode(json: json, messageName: name) else { return }
    let message = decodeWire(Message.self, bytes, what: "the bytes its JSON decoded to")
    let text = ProtoJSON.encode(message)
    let again: [UInt8]
    do {
        again = try ProtoJSON.decode(json: text, messageName: name)
    } catch {
        preconditionFailure("\(name): its own JSON does not decode: \(error)\n\(text)")
    }
    precondition(decodeWire(Message.self, again, what: "its own JSON") == message, "\(name): decode(encode(m)) != m\n\(text)")
}

func decodeWire<Message: ProtoMessage>(_ type: Message.Type, _ bytes: [UInt8], what: String) -> Message {
    do {
        return try bytes.withUnsafeBytes { raw in try Message(serializedBytes: raw) }
    } catch {
        preconditionFailure("\(Message.protoMessageName): \(what) are not a valid message: \(error)")
    }
}
