import GRPCProtocol

/// The life of one request stream as a value without I/O: how far its call has come (headers,
/// request, ready, started) and how far its response has gone (nothing, headers with DATA to
/// follow, the outcome known and the trailers waiting behind the queued messages, ended).
///
/// The connection reports each event of the stream (``routed(streaming:)``, ``dataReceived()``,
/// ``requestEnded(partialMessage:hasRequest:)``, ``startCall()``, ``messageQueued()``,
/// ``finish(_:)``, ``dataRead(written:outboundEmpty:)``, ``shed()``) and does what the returned
/// action says: submit headers, resume deferred DATA, send the trailers, refuse the request,
/// start the handler. Every event is defined in every state (one that does not apply changes
/// nothing and says so), so the whole table is tested without a socket or a session
/// (`HTTP2StreamStateTests`), as ``ConnectionManagement`` is.
struct HTTP2StreamState: Hashable {
    /// How far the call has come.
    enum Call: Hashable, CaseIterable {
        /// The request headers are arriving; no route is chosen yet.
        case receivingHeaders
        /// A unary or server-streaming call reads its one request message until END_STREAM.
        case readingRequest
        /// The request is complete (bidirectional: its headers are in): the handler starts at the
        /// end of the current read, unless the stream is reset first.
        case ready
        /// The handler was started.
        case started
    }

    /// How far the response has gone.
    enum Response: Hashable {
        /// Nothing was submitted.
        case idle
        /// The response headers were submitted with a data provider; `deferred`: the provider
        /// answered `NGHTTP2_ERR_DEFERRED` and waits for `nghttp2_session_resume_data`.
        case open(deferred: Bool)
        /// The outcome is known and the headers are out: the trailers follow the queued messages.
        case closing(GRPCStatus)
        /// Everything was submitted (the trailers, or a Trailers-Only response), or the stream
        /// was shed.
        case ended
    }

    private(set) var call = Call.receivingHeaders
    private(set) var response = Response.idle
    /// A bidirectional-streaming call: request messages go to the handler's sequence as they
    /// arrive, from the end of the headers on.
    private(set) var streamsRequests = false

    /// Whether the call's outcome is decided: nothing more is queued, started or refused.
    var outcomeKnown: Bool {
        switch response {
        case .idle, .open: false
        case .closing, .ended: true
        }
    }

    /// The request headers are in and name a route the call may take.
    enum RoutedAction: Equatable {
        /// Bidirectional: make the handler's request sequence now; the call is ready.
        case prepareRequestStream
        /// Read the request message.
        case readRequest
        /// The stream was routed already or its outcome is known: nothing.
        case none
    }

    mutating func routed(streaming: Bool) -> RoutedAction {
        guard call == .receivingHeaders, !outcomeKnown else { return .none }
        streamsRequests = streaming
        call = streaming ? .ready : .readingRequest
        return streaming ? .prepareRequestStream : .readRequest
    }

    /// Where request DATA goes.
    enum DataAction: Equatable {
        /// To the handler's request sequence (bidirectional; flow control follows what it takes).
        case deliverToHandler
        /// Into the deframer: the request message of a call not yet ready.
        case readRequest
        /// Nowhere: the call's outcome is known, or its request is complete (flow control takes
        /// the bytes back at once).
        case discard
    }

    func dataReceived() -> DataAction {
        if outcomeKnown { return .discard }
        if streamsRequests { return .deliverToHandler }
        return call == .readingRequest ? .readRequest : .discard
    }

    /// What the client's END_STREAM calls for.
    enum EndOfRequestAction: Equatable {
        /// Bidirectional: the handler's sequence ends.
        case finishRequestStream
        /// The request is complete: start the call at the end of the read.
        case startAtEndOfRead
        /// Bidirectional, the request ended inside a message: end the streaming call with this
        /// status (after the messages it sent).
        case endStreamingCall(GRPCStatus)
        /// The request is malformed: refuse the call with this status.
        case refuse(GRPCStatus)
        /// Nothing (the call's outcome is known, or END_STREAM came before a route).
        case none
    }

    mutating func requestEnded(partialMessage: Bool, hasRequest: Bool) -> EndOfRequestAction {
        guard !outcomeKnown else { return .none }
        if streamsRequests {
            return partialMessage ? .endStreamingCall(.endedInsideMessage) : .finishRequestStream
        }
        guard call == .readingRequest else { return .none }
        if partialMessage { return .refuse(.endedInsideMessage) }
        guard hasRequest else { return .refuse(.noRequestMessage) }
        call = .ready
        return .startAtEndOfRead
    }

    /// The read is over: whether the handler starts now (a ready call whose stream is open).
    mutating func startCall() -> Bool {
        guard call == .ready, !outcomeKnown else { return false }
        call = .started
        return true
    }

    /// What a response message, queued on the stream, calls for.
    enum MessageQueuedAction: Equatable {
        /// Submit the response headers with a data provider (the message follows them).
        case submitHeaders
        /// The provider waits: resume it.
        case resumeData
        /// The provider will ask for the message by itself.
        case none
        /// The outcome is known: the message must not be queued (the caller checks
        /// ``outcomeKnown`` first; this answers a late call).
        case drop
    }

    mutating func messageQueued() -> MessageQueuedAction {
        switch response {
        case .idle:
            response = .open(deferred: false)
            return .submitHeaders
        case .open(deferred: true):
            response = .open(deferred: false)
            return .resumeData
        case .open(deferred: false):
            return .none
        case .closing, .ended:
            return .drop
        }
    }

    /// What deciding the call's outcome calls for.
    enum FinishAction: Equatable {
        /// No response went out: the status goes as a Trailers-Only response.
        case trailersOnly
        /// The headers are out: the trailers follow the queued messages; `resume`: the data
        /// provider waits and must be resumed to send them.
        case trailersAfterMessages(resume: Bool)
        /// The outcome was known already: nothing.
        case alreadyKnown
    }

    mutating func finish(_ status: GRPCStatus) -> FinishAction {
        switch response {
        case .idle:
            response = .ended
            return .trailersOnly
        case .open(let deferred):
            response = .closing(status)
            return .trailersAfterMessages(resume: deferred)
        case .closing, .ended:
            return .alreadyKnown
        }
    }

    /// What the data provider answers nghttp2, having copied `written` queued bytes.
    enum DataReadAction: Equatable {
        /// Send these bytes; the provider is asked again.
        case send
        /// The queue is empty and the outcome known: end the DATA without END_STREAM and submit
        /// these trailers.
        case sendTrailers(GRPCStatus)
        /// Nothing to send: `NGHTTP2_ERR_DEFERRED` until a message is queued.
        case deferred
    }

    mutating func dataRead(written: Int, outboundEmpty: Bool) -> DataReadAction {
        if case .closing(let status) = response, outboundEmpty {
            response = .ended
            return .sendTrailers(status)
        }
        guard written == 0 else { return .send }
        // Only an open response waits for messages: nghttp2 asks with room for at least one byte,
        // so a closing one with messages queued always writes some.
        if case .open = response { response = .open(deferred: true) }
        return .deferred
    }

    /// The stream is reset for the server's own reasons (its client does not read): whether the
    /// outcome was unknown until now (the call then ends with the reset's status).
    mutating func shed() -> Bool {
        let wasKnown = outcomeKnown
        response = .ended
        return !wasKnown
    }
}
