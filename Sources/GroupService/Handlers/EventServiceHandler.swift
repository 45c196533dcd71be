import GRPCProtocol
import GroupAPI

/// The handler of `groupd.v1.EventService` (event.proto): Subscribe, served by the event hub
/// straight on the call's writer (items are encoded once and shared by every stream they go to).
struct EventServiceHandler: GroupdHandler {
    let service: GroupdService

    /// Registers every EventService method, in the order of event.proto.
    func register(in routes: inout Routes) {
        routes.serverStreaming(Groupd_V1_EventService.Method.subscribe) { [self] request, call, writer in
            try await subscribe(request, call, writer: writer)
        }
    }

    /// Subscribe: the caller's event stream, written by ``GroupdService/events``.
    func subscribe(_ request: Groupd_V1_SubscribeRequest, _ call: CallContext, writer: ServerStreamWriter) async throws {
        try await events.subscribe(request, call: call, writer: writer)
    }
}
