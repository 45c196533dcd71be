import FuzzSupport
import GroupAPI

/// Every method's request type (and response type) decoded from arbitrary bytes through the
/// protobuf-c bridge, as the server (and the client) decode them. What decodes must encode, and
/// the encoding must decode back to an equal value.
///
/// Input: byte 0 picks the type — `allMethods[byte / 2]`, its request when even, its response
/// when odd (modulo the number of methods) — the rest is the message.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzProtoDecode(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = fuzzInput(start, count)
    guard input.count >= 1 else { return 0 }
    let method = allMethods[Int(input[0] / 2) % allMethods.count]
    let type = input[0] % 2 == 0 ? method.requestType : method.responseType
    roundTrip(type, UnsafeRawBufferPointer(rebasing: input[1...]))
    return 0
}

func roundTrip<Message: ProtoMessage>(_ type: Message.Type, _ bytes: UnsafeRawBufferPointer) {
    guard let message = try? Message(serializedBytes: bytes) else { return }
    let encoded = message.serializedBytes()
    precondition(encoded.count == message.serializedSize, "\(Message.protoMessageName): serializedSize disagrees with the encoding")
    let decoded: Message
    do {
        decoded = try Message(serializedBytes: encoded)
    } catch {
        preconditionFailure("\(Message.protoMessageName): its own encoding does not decode: \(error)")
    }
    precondition(decoded == message, "\(Message.protoMessageName): decode(encode(m)) != m")
}
