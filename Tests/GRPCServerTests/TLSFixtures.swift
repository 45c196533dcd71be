import Foundation

/// PEM files for the TLS tests, made once with the `openssl` command line: a CA and a server
/// certificate it signed (valid 100 years, serial 1001, `localhost` and `127.0.0.1`), the same
/// certificate already expired (serial 1002), the server key, and an unrelated key.
enum TLSFixtures {
    static let ca = """
        -----BEGIN CERTIFICATE-----
        MIIBkDCCATWgAwIBAgIUaju6VZrUKyc240ZPkY/KrcfaQ4wwCgYIKoZIzj0EAwIw
        HDEaMBgGA1UEAwwRZ3JvdXBkLWZpeHR1cmUtY2EwIBcNMjYxMTI0MjIzNTMwWhgP
        MjEyNjEwMzEyMjM1MzBaMBwxGjAYBgNVBAMMEWdyb3VwZC1maXh0dXJlLWNhMFkw
        EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE5+BhrpkncTCg7a/ZbRbqlBugU1OGQDeb
        dEMP/K4dLBA2vTxE37fPYLTa2a7JWNEXaOO24//eWfszPRGE1pY1tKNTMFEwHQYD
        VR0OBBYEFD8+dhxIAscqlBUXovboF9YQZfWcMB8GA1UdIwQYMBaAFD8+dhxIAscq
        lBUXovboF9YQZfWcMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSQAwRgIh
        AIHE2mKwC54UKpLrCEmzAROoybfT6P95NAFAWD41dM2oAiEAjDOX9cdGuKXZx8W+
        vUmzWYqAU71+AAMfL0L+5EPg2T4=
        -----END CERTIFICATE-----
        """
    static let server = """
        -----BEGIN CERTIFICATE-----
        MIIBgDCCASagAwIBAgICEAEwCgYIKoZIzj0EAwIwHDEaMBgGA1UEAwwRZ3JvdXBk
        LWZpeHR1cmUtY2EwIBcNMjYxMTI0MjIzNTMwWhgPMjEyNjEwMzEyMjM1MzBaMBQx
        EjAQBgNVBAMMCWxvY2FsaG9zdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABCk8
        5SWg/IX/g9Li4TzRm6+LQTE0EclcGspa7dGSUu27iIpsufLEart8Fm/p8MN/tk+S
        IrEgcpN2pP3GSTry8YijXjBcMBoGA1UdEQQTMBGCCWxvY2FsaG9zdIcEfwAAATAd
        BgNVHQ4EFgQUJO8So2ZE+HOHLdVp1zW8twdBt5cwHwYDVR0jBBgwFoAUPz52HEgC
        xyqUFRei9ugX1hBl9ZwwCgYIKoZIzj0EAwIDSAAwRQIhAJk5fud4vSFGKlf4YqFW
        QgmY4iU7kb75jdbOZ6/zcwdQAiAZUh21SZlQlG4jXQJpbHJ06zBiHfMlN7V5lfGA
        9RfHQw==
        -----END CERTIFICATE-----
        """
    static let serverKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgFoiJ4rdlXHOmivqg
        AVFtICrFr9C0D1uRN7CZgDeq4gWhRANCAAQpPOUloPyF/4PS4uE80Zuvi0ExNBHJ
        XBrKWu3RklLtu4iKbLnyxGq7fBZv6fDDf7ZPkiKxIHKTdqT9xkk68vGI
        -----END PRIVATE KEY-----
        """
    static let expired = """
        -----BEGIN CERTIFICATE-----
        MIIBfjCCASSgAwIBAgICEAIwCgYIKoZIzj0EAwIwHDEaMBgGA1UEAwwRZ3JvdXBk
        LWZpeHR1cmUtY2EwHhcNMjYxMTI0MjIzNTMwWhcNMjYxMTIzMjIzNTMwWjAUMRIw
        EAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQpPOUl
        oPyF/4PS4uE80Zuvi0ExNBHJXBrKWu3RklLtu4iKbLnyxGq7fBZv6fDDf7ZPkiKx
        IHKTdqT9xkk68vGIo14wXDAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwHQYD
        VR0OBBYEFCTvEqNmRPhzhy3Vadc1vLcHQbeXMB8GA1UdIwQYMBaAFD8+dhxIAscq
        lBUXovboF9YQZfWcMAoGCCqGSM49BAMCA0gAMEUCIHyiWkkWT2vrTvpA59UET3Kt
        VF8ZR0e42j8xad7kTtBMAiEApu/cSLlXM9EXwKe4OnsGqOYWR2M9UZkrsAUKmWMm
        QrA=
        -----END CERTIFICATE-----
        """
    static let otherKey = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQghxQD/kVByxB6p7yt
        /xBgl6icLNkVfsgunp5TseYby2ihRANCAARS68EaOs4i++K5Ng39mMcfKSMdoVux
        nZmOlHDWU2MWI3+7daHlPoPXWlq37/Ky9c3O3n16JdEuigl4OM26p/y/
        -----END PRIVATE KEY-----
        """

    /// A new temporary directory holding `files` (name → contents); removed by the caller.
    static func directory(_ files: [String: String]) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("groupd-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, contents) in files {
            try (contents + "\n").write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        return directory
    }
}
