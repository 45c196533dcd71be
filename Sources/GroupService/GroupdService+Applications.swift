import GroupAPI
import GroupModel
import GroupStore

/// What JoinGroup, ApplicationService and the event stream show of an application, and the
/// expiry sweep's batch, which ListApplications and the retention job share.
extension GroupdService {
    /// In how many groups a listing marks due items expired (with their events) before it reads.
    static let expiryBatch = 200

    /// An item in the API's form, as `caller` (with `roles`) sees it at `now`.
    static func applicationView(
        _ application: Application, groupName: String, roles: Set<ApplicationRole>, caller: Caller, now: Timestamp
    ) -> Groupd_V1_Application {
        .with {
            $0.applicationID = application.id
            $0.kind = application.kind == .join ? .join : .invitation
            $0.state = state(application.state(at: now))
            $0.groupID = application.groupID
            $0.groupName = groupName
            switch application.kind {
            case .join: $0.applicantUserID = application.senderID
            case .invitation:
                $0.inviterUserID = application.senderID
                $0.inviteeUserID = application.subjectID
            }
            $0.message = application.message
            $0.createTime = APIMapping.timestamp(application.createdAt)
            $0.updateTime = APIMapping.timestamp(application.updatedAt)
            $0.expireTime = APIMapping.timestamp(application.expiresAt)
            $0.needsApproval = application.needsApproval
            $0.approval = decision(application.approval)
            $0.needsConsent = application.needsConsent
            $0.consent = decision(application.consent)
            $0.handledByUserID = application.handledBy ?? ""
            $0.handleMessage = application.handleMessage
            $0.handleTime = application.handledAt.map(APIMapping.timestamp)
            if application.state(at: now) == .expired, application.handledAt == nil {
                $0.handleTime = APIMapping.timestamp(application.expiresAt)
            }
            $0.callerRoles = ApplicationRole.allCases.filter(roles.contains).map(role)
            $0.handleStatus = switch GroupRules.handleStatus(of: application, roles: roles, for: caller.operatorID, now: now) {
            case .notHandled: .notHandled
            case .handledBySelf: .handledBySelf
            case .handledByOther: .handledByOther
            }
        }
    }

    static func decision(_ decision: ApplicationDecision) -> Groupd_V1_Decision {
        .with {
            $0.state = switch decision.state {
            case .notNeeded: .unspecified
            case .pending: .pending
            case .accepted: .accepted
            case .refused: .refused
            }
            $0.decidedByUserID = decision.decidedBy ?? ""
            $0.message = decision.message
            $0.decideTime = decision.decidedAt.map(APIMapping.timestamp)
        }
    }

    static func state(_ state: ApplicationState) -> Groupd_V1_ApplicationState {
        switch state {
        case .pending: .pending
        case .accepted: .accepted
        case .refused: .refused
        case .expired: .expired
        case .withdrawn: .withdrawn
        }
    }

    static func role(_ role: ApplicationRole) -> Groupd_V1_ApplicationRole {
        switch role {
        case .approver: .approver
        case .invitee: .invitee
        case .sender: .sender
        }
    }
}
