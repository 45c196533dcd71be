import Testing

@testable import GRPCProtocol
@testable import GRPCServer

/// The stream's state machine as a plain value: every event in every reachable state, with the
/// rules the connection relies on checked on each transition, then each kind of call's life.
@Suite struct HTTP2StreamStateTests {
    /// One event with its arguments.
    enum Event: Hashable, CustomStringConvertible {
        case routed(streaming: Bool)
        case dataReceived
        case requestEnded(partialMessage: Bool, hasRequest: Bool)
        case startCall
        case messageQueued
        case finish(GRPCStatus)
        case dataRead(written: Int, outboundEmpty: Bool)
        case shed

        /// Every event, with each argument that changes an outcome.
        static let all: [Event] = [
            .routed(streaming: false), .routed(streaming: true), .dataReceived,
            .requestEnded(partialMessage: false, hasRequest: false), .requestEnded(partialMessage: false, hasRequest: true),
            .requestEnded(partialMessage: true, hasRequest: false), .requestEnded(partialMessage: true, hasRequest: true),
            .startCall, .messageQueued, .finish(.ok), .finish(GRPCStatus(.deadlineExceeded, "deadline exceeded")),
            .dataRead(written: 0, outboundEmpty: true), .dataRead(written: 0, outboundEmpty: false),
            .dataRead(written: 9, outboundEmpty: true), .dataRead(written: 9, outboundEmpty: false), .shed,
        ]

        var description: String {
            switch self {
            case .routed(let streaming): "routed(streaming: \(streaming))"
            case .dataReceived: "dataReceived"
            case .requestEnded(let partial, let has): "requestEnded(partial: \(partial), hasRequest: \(has))"
            case .startCall: "startCall"
            case .messageQueued: "messageQueued"
            case .finish(let status): "finish(\(status.code.rawValue))"
            case .dataRead(let written, let empty): "dataRead(written: \(written), outboundEmpty: \(empty))"
            case .shed: "shed"
            }
        }
    }

    /// The effect of one event on what the connection did, as nghttp2 and the handler see it.
    enum Effect: Hashable {
        case none
        case prepareRequestStream, readRequest
        case deliverToHandler, discard
        case finishRequestStream, startAtEndOfRead, endStreamingCall(GRPCStatus), refuse(GRPCStatus)
        case started, notStarted
        case submitHeaders, resumeData, dropMessage
        case trailersOnly, trailersAfterMessages(resume: Bool), alreadyKnown
        case send, sendTrailers(GRPCStatus), deferred
        case shedUnknown, shedKnown
    }

    static func apply(_ event: Event, to state: inout HTTP2StreamState) -> Effect {
        switch event {
        case .routed(let streaming):
            switch state.routed(streaming: streaming) {
            case .prepareRequestStream: return .prepareRequestStream
            case .readRequest: return .readRequest
            case .none: return .none
            }
        case .dataReceived:
            switch state.dataReceived() {
            case .deliverToHandler: return .deliverToHandler
            case .readRequest: return .readRequest
            case .discard: return .discard
            }
        case .requestEnded(let partial, let has):
            switch state.requestEnded(partialMessage: partial, hasRequest: has) {
            case .finishRequestStream: return .finishRequestStream
            case .startAtEndOfRead: return .startAtEndOfRead
            case .endStreamingCall(let status): return .endStreamingCall(status)
            case .refuse(let status): return .refuse(status)
            case .none: return .none
            }
        case .startCall:
            return state.startCall() ? .started : .notStarted
        case .messageQueued:
            switch state.messageQueued() {
            case .submitHeaders: return .submitHeaders
            case .resumeData: return .resumeData
            case .none: return .none
            case .drop: return .dropMessage
            }
        case .finish(let status):
            switch state.finish(status) {
            case .trailersOnly: return .trailersOnly
            case .trailersAfterMessages(let resume): return .trailersAfterMessages(resume: resume)
            case .alreadyKnown: return .alreadyKnown
            }
        case .dataRead(let written, let empty):
            switch state.dataRead(written: written, outboundEmpty: empty) {
            case .send: return .send
            case .sendTrailers(let status): return .sendTrailers(status)
            case .deferred: return .deferred
            }
        case .shed:
            return state.shed() ? .shedUnknown : .shedKnown
        }
    }

    /// A state with what the connection has done so far on the stream: the facts the rules are
    /// stated in.
    struct World: Hashable {
        var state = HTTP2StreamState()
        var headersSubmitted = false
        /// The response is over on the wire (Trailers-Only, trailers, or a reset).
        var ended = false
        /// The data provider answered DEFERRED and was not resumed since.
        var providerWaits = false
        var started = false
        /// Whether the call was routed, and as a streaming call.
        var routed: Bool?
        /// The outcome the connection was told to send (or the shed), once.
        var outcome: Effect?
    }

    /// Whether an event can happen in `world` at all: nghttp2 asks a data provider only after
    /// response headers were submitted with one, and not while it waits or once it ended. Any
    /// other event may come at any time (a client's DATA after a refusal, a handler ending after
    /// the deadline, a ready call whose stream was refused in the same read).
    static func canHappen(_ event: Event, in world: World) -> Bool {
        guard case .dataRead = event else { return true }
        return world.headersSubmitted && !world.ended && !world.providerWaits
    }

    /// Applies `event`, checks every rule the transition must keep, and returns the next world.
    static func step(_ world: World, _ event: Event) -> World {
        var next = world
        let effect = apply(event, to: &next.state)
        let context = Comment(rawValue: "\(event) in \(world.state) → \(effect)")
        let outcomeWasKnown = world.state.outcomeKnown
        // An outcome once known stays known, and nothing starts, queues or refuses after it.
        if outcomeWasKnown {
            #expect(next.state.outcomeKnown, context)
            #expect(![.submitHeaders, .resumeData, .started, .trailersOnly, .prepareRequestStream, .readRequest,
                       .startAtEndOfRead, .finishRequestStream, .deliverToHandler].contains(effect), context)
            if case .refuse = effect { Issue.record(context) }
            if case .endStreamingCall = effect { Issue.record(context) }
            if case .trailersAfterMessages = effect { Issue.record(context) }
        }
        // The call never goes back.
        let order = HTTP2StreamState.Call.allCases
        #expect(order.firstIndex(of: next.state.call)! >= order.firstIndex(of: world.state.call)!, context)
        switch effect {
        case .submitHeaders:
            #expect(!world.headersSubmitted, "headers submitted twice: \(context)")
            next.headersSubmitted = true
        case .trailersOnly:
            #expect(!world.headersSubmitted && !world.ended, "Trailers-Only after a response began: \(context)")
            next.ended = true
            next.outcome = effect
        case .sendTrailers:
            #expect(world.headersSubmitted && !world.ended, context)
            #expect(world.outcome == nil, "a second outcome: \(context)")
            next.ended = true
            next.outcome = effect
        case .trailersAfterMessages(let resume):
            #expect(world.headersSubmitted, context)
            // The provider waits exactly when it must be woken to send the trailers.
            #expect(resume == world.providerWaits, context)
            next.providerWaits = false
        case .resumeData:
            #expect(world.providerWaits, "a resume with no provider waiting: \(context)")
            next.providerWaits = false
        case .deferred:
            next.providerWaits = true
        case .none where event == .messageQueued:
            // A message queued while the provider waits would never be sent.
            #expect(!world.providerWaits, context)
        case .started:
            #expect(!world.started, "started twice: \(context)")
            #expect(world.routed != nil, "started before routing: \(context)")
            next.started = true
        case .prepareRequestStream:
            #expect(world.routed == nil && event == .routed(streaming: true), context)
            next.routed = true
        case .readRequest:
            if event == .dataReceived {
                #expect(world.routed == false && !world.started, context)
            } else {
                #expect(world.routed == nil && event == .routed(streaming: false), context)
                next.routed = false
            }
        case .deliverToHandler:
            #expect(world.routed == true, context)
        case .shedUnknown:
            #expect(!outcomeWasKnown, context)
            next.ended = true
        case .shedKnown:
            #expect(outcomeWasKnown, context)
            next.ended = true
        default:
            break
        }
        // Once the response is over on the wire, the state says the outcome is known.
        if next.ended { #expect(next.state.outcomeKnown, context) }
        return next
    }

    @Test("every event in every reachable state keeps the rules the connection relies on")
    func everyEventInEveryState() {
        var seen: Set<World> = [World()]
        var frontier = [World()]
        var transitions = 0
        while let world = frontier.popLast() {
            for event in Event.all where Self.canHappen(event, in: world) {
                let next = Self.step(world, event)
                transitions += 1
                if seen.insert(next).inserted { frontier.append(next) }
            }
        }
        let states = Set(seen.map(\.state))
        // Every call stage meets every response stage the connection can produce with it.
        #expect(Set(states.map(\.call)) == Set(HTTP2StreamState.Call.allCases))
        #expect(states.contains { $0.response == .open(deferred: true) && $0.call == .started })
        #expect(states.contains { if case .closing = $0.response { true } else { false } })
        // Each call stage (4, and 2 of them for a bidirectional call) with each response stage
        // (nothing, open, open with the provider waiting, closing with either status, ended).
        #expect(states.count == 6 * 6, "\(states.count) states")
        #expect(transitions >= states.count * Event.all.count / 2, "\(transitions) transitions")
    }

    @Test("each stage of a stream answers the events that matter there as the connection expects")
    func answersByStage() {
        // The states a stream passes through, built by events, and what each event answers there.
        func state(_ events: [Event]) -> HTTP2StreamState {
            var state = HTTP2StreamState()
            for event in events { _ = Self.apply(event, to: &state) }
            return state
        }
        let unaryStarted: [Event] = [.routed(streaming: false), .requestEnded(partialMessage: false, hasRequest: true), .startCall]
        let states: [(String, HTTP2StreamState)] = [
            ("receiving headers", state([])),
            ("reading the request", state([.routed(streaming: false)])),
            ("ready", state([.routed(streaming: false), .requestEnded(partialMessage: false, hasRequest: true)])),
            ("bidirectional ready", state([.routed(streaming: true)])),
            ("started", state(unaryStarted)),
            ("open", state(unaryStarted + [.messageQueued])),
            ("open, provider waits", state(unaryStarted + [.messageQueued, .dataRead(written: 0, outboundEmpty: true)])),
            ("closing", state(unaryStarted + [.messageQueued, .finish(.ok)])),
            ("ended by trailers", state(unaryStarted + [.messageQueued, .finish(.ok), .dataRead(written: 3, outboundEmpty: true)])),
            ("ended Trailers-Only", state([.finish(GRPCStatus(.unimplemented, "no"))])),
            ("shed", state(unaryStarted + [.messageQueued, .shed])),
        ]
        let expected: [String: [Event: Effect]] = [
            "receiving headers": [.routed(streaming: false): .readRequest, .dataReceived: .discard, .startCall: .notStarted,
                                  .requestEnded(partialMessage: false, hasRequest: true): .none, .messageQueued: .submitHeaders, .finish(.ok): .trailersOnly],
            "reading the request": [.routed(streaming: true): .none, .dataReceived: .readRequest, .startCall: .notStarted,
                                    .requestEnded(partialMessage: false, hasRequest: true): .startAtEndOfRead,
                                    .requestEnded(partialMessage: true, hasRequest: true): .refuse(GRPCStatus.endedInsideMessage),
                                    .requestEnded(partialMessage: false, hasRequest: false): .refuse(GRPCStatus(.internal, "request stream ended without a message")),
                                    .finish(.ok): .trailersOnly],
            "ready": [.dataReceived: .discard, .startCall: .started, .requestEnded(partialMessage: false, hasRequest: true): .none, .finish(.ok): .trailersOnly],
            "bidirectional ready": [.dataReceived: .deliverToHandler, .startCall: .started,
                                    .requestEnded(partialMessage: false, hasRequest: false): .finishRequestStream,
                                    .requestEnded(partialMessage: true, hasRequest: false): .endStreamingCall(GRPCStatus.endedInsideMessage),
                                    .routed(streaming: true): .none],
            "started": [.dataReceived: .discard, .startCall: .notStarted, .messageQueued: .submitHeaders, .finish(.ok): .trailersOnly,
                        .requestEnded(partialMessage: false, hasRequest: true): .none, .shed: .shedUnknown],
            "open": [.messageQueued: .none, .finish(.ok): .trailersAfterMessages(resume: false),
                     .dataRead(written: 0, outboundEmpty: true): .deferred, .dataRead(written: 9, outboundEmpty: true): .send, .shed: .shedUnknown],
            "open, provider waits": [.messageQueued: .resumeData, .finish(.ok): .trailersAfterMessages(resume: true)],
            "closing": [.messageQueued: .dropMessage, .finish(.ok): .alreadyKnown, .dataRead(written: 9, outboundEmpty: false): .send,
                        .dataRead(written: 9, outboundEmpty: true): .sendTrailers(.ok), .dataRead(written: 0, outboundEmpty: true): .sendTrailers(.ok),
                        .dataReceived: .discard, .startCall: .notStarted, .shed: .shedKnown],
            "ended by trailers": [.messageQueued: .dropMessage, .finish(.ok): .alreadyKnown, .dataReceived: .discard, .shed: .shedKnown],
            "ended Trailers-Only": [.routed(streaming: false): .none, .messageQueued: .dropMessage, .finish(.ok): .alreadyKnown,
                                    .dataReceived: .discard, .requestEnded(partialMessage: false, hasRequest: true): .none, .startCall: .notStarted],
            "shed": [.finish(.ok): .alreadyKnown, .messageQueued: .dropMessage, .dataReceived: .discard],
        ]
        for (name, start) in states {
            for (event, effect) in expected[name] ?? [:] {
                var state = start
                let answer1 = Self.apply(event, to: &state)
                #expect(answer1 == effect, "\(event) in \(name)")
            }
        }
        #expect(Set(states.map(\.0)) == Set(expected.keys))
    }

    @Test("a unary call: request, start, one message, trailers after it")
    func unaryLife() {
        var state = HTTP2StreamState()
        let answer2 = state.routed(streaming: false)
        #expect(answer2 == .readRequest)
        #expect(state.dataReceived() == .readRequest)
        let answer3 = state.startCall()
        #expect(!answer3, "the request is not complete")
        let answer4 = state.requestEnded(partialMessage: false, hasRequest: true)
        #expect(answer4 == .startAtEndOfRead)
        #expect(state.dataReceived() == .discard, "DATA after the request is not read")
        let answer5 = state.startCall()
        #expect(answer5)
        let answer6 = state.startCall()
        #expect(!answer6)
        let answer7 = state.messageQueued()
        #expect(answer7 == .submitHeaders)
        let answer8 = state.finish(.ok)
        #expect(answer8 == .trailersAfterMessages(resume: false))
        #expect(state.outcomeKnown)
        let answer9 = state.dataRead(written: 12, outboundEmpty: false)
        #expect(answer9 == .send)
        let answer10 = state.dataRead(written: 5, outboundEmpty: true)
        #expect(answer10 == .sendTrailers(.ok))
        #expect(state.response == .ended)
    }

    @Test("a server-streaming call whose provider waits between messages is resumed by each, and by its end")
    func streamingWithDeferral() {
        var state = HTTP2StreamState()
        _ = state.routed(streaming: false)
        _ = state.requestEnded(partialMessage: false, hasRequest: true)
        let answer11 = state.startCall()
        #expect(answer11)
        let answer12 = state.messageQueued()
        #expect(answer12 == .submitHeaders)
        let answer13 = state.dataRead(written: 20, outboundEmpty: true)
        #expect(answer13 == .send)
        let answer14 = state.dataRead(written: 0, outboundEmpty: true)
        #expect(answer14 == .deferred)
        let answer15 = state.messageQueued()
        #expect(answer15 == .resumeData)
        let answer16 = state.messageQueued()
        #expect(answer16 == .none, "resumed already")
        let answer17 = state.dataRead(written: 20, outboundEmpty: true)
        #expect(answer17 == .send)
        let answer18 = state.dataRead(written: 0, outboundEmpty: true)
        #expect(answer18 == .deferred)
        let status = GRPCStatus(.aborted, "gone")
        let answer19 = state.finish(status)
        #expect(answer19 == .trailersAfterMessages(resume: true))
        let answer20 = state.dataRead(written: 0, outboundEmpty: true)
        #expect(answer20 == .sendTrailers(status))
    }

    @Test("a bidirectional call takes DATA from its headers on, and its half-close ends the handler's sequence")
    func bidirectionalLife() {
        var state = HTTP2StreamState()
        #expect(state.dataReceived() == .discard, "no route yet")
        let answer21 = state.routed(streaming: true)
        #expect(answer21 == .prepareRequestStream)
        #expect(state.call == .ready)
        #expect(state.dataReceived() == .deliverToHandler)
        let answer22 = state.startCall()
        #expect(answer22)
        #expect(state.dataReceived() == .deliverToHandler, "still, once the handler runs")
        let answer23 = state.requestEnded(partialMessage: false, hasRequest: false)
        #expect(answer23 == .finishRequestStream)
        let answer24 = state.finish(.ok)
        #expect(answer24 == .trailersOnly, "no message went out")
        #expect(state.dataReceived() == .discard)
    }

    @Test("a reset before the end of the read, a refusal, and a shed stream: nothing starts or goes out after")
    func endsBeforeStart() {
        var refused = HTTP2StreamState()
        _ = refused.routed(streaming: false)
        let answer25 = refused.requestEnded(partialMessage: true, hasRequest: false)
        #expect(answer25 == .refuse(GRPCStatus.endedInsideMessage))
        let answer26 = refused.finish(GRPCStatus.endedInsideMessage)
        #expect(answer26 == .trailersOnly)
        let answer27 = refused.requestEnded(partialMessage: false, hasRequest: true)
        #expect(answer27 == .none)
        let answer28 = refused.startCall()
        #expect(!answer28)

        var expired = HTTP2StreamState()
        _ = expired.routed(streaming: false)
        _ = expired.requestEnded(partialMessage: false, hasRequest: true)
        let answer29 = expired.finish(GRPCStatus(.deadlineExceeded, "deadline exceeded"))
        #expect(answer29 == .trailersOnly)
        let answer30 = expired.startCall()
        #expect(!answer30, "a call whose outcome is known before the end of the read never starts")

        var shed = HTTP2StreamState()
        _ = shed.routed(streaming: true)
        let answer31 = shed.startCall()
        #expect(answer31)
        _ = shed.messageQueued()
        let answer32 = shed.shed()
        #expect(answer32)
        let answer33 = shed.shed()
        #expect(!answer33)
        let answer34 = shed.messageQueued()
        #expect(answer34 == .drop)
        let answer35 = shed.finish(.ok)
        #expect(answer35 == .alreadyKnown)
    }
}
