import GRPCProtocol
import GroupAPI
import GroupModel

extension GroupdService {
    /// Registers `EventService.Subscribe`, served by the event hub straight on the call's
    /// writer (items are encoded once and shared by every stream they go to).
    /// - Parameters:
    ///   - routes: The service's routes, which the method's handler is added to (and its path marked
    ///     implemented).
    ///   - authenticate: The service's authentication and admission of a call.
    func registerEventMethods(
        in routes: inout Routes, authenticate: @escaping @Sendable (ServerContext) throws -> CallContext
    ) {
        let path = Groupd_V1_EventService.Method.subscribe.path
        routes.registerExternally({ router in
            router.register(path, .serverStreaming { [events] bytes, server, writer in
                let call = try authenticate(server)
                let request = try MessageCoding.decode(Groupd_V1_SubscribeRequest.self, from: bytes)
                try await events.subscribe(request, call: call, writer: writer)
            })
        }, paths: [path])
    }
}
