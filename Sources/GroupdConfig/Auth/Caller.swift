public import GroupModel

/// Who is calling, as proven by the bearer token: the app, the token's subject, whether it is the
/// app's backend, and the user an admin token acts for.
public struct Caller: Sendable, Hashable, CustomStringConvertible {
    /// The app (tenant) of the call; every read and write is scoped to it.
    public var appID: String
    /// The token's subject (`sub`): a user id, or for admin tokens the backend's own account name.
    public var userID: String
    /// Whether the token's `role` is `admin` (the app's backend).
    public var isAdmin: Bool
    /// With an admin token and an `x-operator-id` header, the user the backend acts for; that
    /// user's permissions then apply.
    public var actingUserID: String?

    /// Create a caller.
    public init(appID: String, userID: String, isAdmin: Bool, actingUserID: String? = nil) {
        self.appID = appID
        self.userID = userID
        self.isAdmin = isAdmin
        self.actingUserID = actingUserID
    }

    /// Whether the call has the backend's rights: an admin token acting for no user.
    public var isBackend: Bool { self.isAdmin && self.actingUserID == nil }

    /// The user whose permissions apply: the acting user, or the subject of a user token;
    /// `nil` for the backend.
    public var operatorID: String? {
        if let actingUserID { return actingUserID }
        return self.isAdmin ? nil : self.userID
    }

    /// The caller's acting role in a group, given the operator's membership there (`nil`: none).
    public func actingRole(membership role: MemberRole?) -> ActingRole {
        ActingRole(isBackend: self.isBackend, role: role)
    }

    /// `app/user`, with `(admin)` or `(admin as other)`.
    public var description: String {
        var text = "\(self.appID)/\(self.userID)"
        if self.isAdmin { text += self.actingUserID.map { " (admin as \($0))" } ?? " (admin)" }
        return text
    }
}
