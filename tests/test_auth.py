"""Every token fault is UNAUTHENTICATED with its own ErrorInfo reason, through a real groupd;
Health/Check needs no token. Tokens are minted here in Python (support.mint_token)."""
import base64
import hashlib
import hmac
import json
import time

import grpc
import pytest

from support import APP_ID, APP_SECRET, b64url, error_info, mint_token, user_md
from groupd.v1 import group_pb2, group_pb2_grpc
from grpc.health.v1 import health_pb2, health_pb2_grpc


def bearer(token):
    return [("authorization", "Bearer " + token)]


def call_get_groups_info(channel, metadata):
    stub = group_pb2_grpc.GroupServiceStub(channel)
    return stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["any"]), metadata=metadata, timeout=10)


def expect_unauthenticated(channel, metadata, reason):
    with pytest.raises(grpc.RpcError) as caught:
        call_get_groups_info(channel, metadata)
    error = caught.value
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED, error
    info = error_info(error)
    assert info is not None, f"no ErrorInfo in {error.trailing_metadata()}"
    assert info.reason == reason, info
    assert info.domain == "groupd"
    return info


def unsigned(alg, signature=b""):
    """A token with header `alg`, good claims, and `signature` (HS256 over the input for 'HS256-sig')."""
    header = b64url(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"app": APP_ID, "sub": "alice", "role": "user",
                                 "exp": int(time.time()) + 3600}).encode())
    return f"{header}.{payload}.{b64url(signature)}"


def test_a_good_token_passes(channel):
    response = call_get_groups_info(channel, user_md("alice"))
    assert [f.reason for f in response.failures] == ["GROUP_NOT_FOUND"]


def test_missing_header(channel):
    expect_unauthenticated(channel, None, "TOKEN_MISSING")
    expect_unauthenticated(channel, [("authorization", "")], "TOKEN_MISSING")


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Token {jwt}", "{jwt}", "Bearer", "Bearer {jwt} extra"])
def test_not_bearer(channel, header):
    value = header.format(jwt=mint_token())
    expect_unauthenticated(channel, [("authorization", value)], "TOKEN_MALFORMED")


@pytest.mark.parametrize("token", ["not-a-jwt", "a.b", "a.b.c.d", "%%%.%%%.%%%", "e30.e30.", "eyJhbGciOiJIUzI1NiJ9.bm90IGpzb24.c2ln"])
def test_malformed_jwt(channel, token):
    expect_unauthenticated(channel, bearer(token), "TOKEN_MALFORMED")


def test_wrong_signature(channel):
    expect_unauthenticated(channel, bearer(mint_token(secret="another-secret-entirely-0123456789")), "TOKEN_BAD_SIGNATURE")
    # A payload changed after signing.
    header, _, signature = mint_token(sub="alice", role="user").split(".")
    forged = b64url(json.dumps({"app": APP_ID, "sub": "root", "role": "admin",
                                "exp": int(time.time()) + 3600}).encode())
    expect_unauthenticated(channel, bearer(f"{header}.{forged}.{signature}"), "TOKEN_BAD_SIGNATURE")


def test_expired(channel):
    expect_unauthenticated(channel, bearer(mint_token(exp_in=-60)), "TOKEN_EXPIRED")


def test_not_yet_valid(channel):
    token = mint_token(claims={"nbf": int(time.time()) + 3600})
    expect_unauthenticated(channel, bearer(token), "TOKEN_NOT_YET_VALID")


def test_unknown_app(channel):
    info = expect_unauthenticated(channel, bearer(mint_token(app="app-nowhere")), "UNKNOWN_APP")
    assert info.metadata["app"] == "app-nowhere"


def test_unknown_kid(channel):
    expect_unauthenticated(channel, bearer(mint_token(kid="k9")), "UNKNOWN_KID")
    # The configured kid works.
    call_get_groups_info(channel, bearer(mint_token(kid="k1")))


@pytest.mark.parametrize("claim", ["app", "sub", "role", "exp"])
def test_missing_claim(channel, claim):
    info = expect_unauthenticated(channel, bearer(mint_token(drop=(claim,))), "CLAIM_MISSING")
    assert info.metadata["claim"] == claim


@pytest.mark.parametrize("role", ["root", "", "ADMIN", "superuser"])
def test_bad_role(channel, role):
    expect_unauthenticated(channel, bearer(mint_token(role=role)), "BAD_ROLE")


@pytest.mark.parametrize("alg", ["HS384", "HS512", "RS256", "none"])
def test_other_algorithm(channel, alg):
    # Signed with the app's secret (HMAC-SHA256) but labelled otherwise, and unsigned.
    expect_unauthenticated(channel, bearer(mint_token(alg=alg)), "TOKEN_MALFORMED")
    expect_unauthenticated(channel, bearer(unsigned(alg)), "TOKEN_MALFORMED")


def test_user_token_cannot_act_for_another_user(channel):
    with pytest.raises(grpc.RpcError) as caught:
        call_get_groups_info(channel, user_md("alice") + [("x-operator-id", "bob")])
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_info(caught.value).reason == "OPERATOR_OVERRIDE_FORBIDDEN"


def test_every_group_rpc_needs_a_token(channel):
    stub = group_pb2_grpc.GroupServiceStub(channel)
    calls = [
        lambda: stub.CreateGroup(group_pb2.CreateGroupRequest(), timeout=10),
        lambda: stub.GetGroupsInfo(group_pb2.GetGroupsInfoRequest(group_ids=["x"]), timeout=10),
        lambda: stub.DismissGroup(group_pb2.DismissGroupRequest(group_id="x"), timeout=10),
    ]
    for call in calls:
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_info(caught.value).reason == "TOKEN_MISSING"


@pytest.mark.parametrize("metadata", [None, [("authorization", "Bearer garbage")], bearer(mint_token(exp_in=-60))])
def test_health_check_needs_no_token(channel, metadata):
    stub = health_pb2_grpc.HealthStub(channel)
    response = stub.Check(health_pb2.HealthCheckRequest(service=""), metadata=metadata, timeout=10)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    named = stub.Check(health_pb2.HealthCheckRequest(service="groupd.v1.GroupService"), metadata=metadata, timeout=10)
    assert named.status == health_pb2.HealthCheckResponse.SERVING


# Faults one by one that the cases above leave out.

def test_a_token_signed_with_another_apps_secret(channel):
    # app-one's name, app-two's secret (a tenant forging another's tokens): the signature fails.
    from support import OTHER_APP_SECRET
    expect_unauthenticated(channel, bearer(mint_token(secret=OTHER_APP_SECRET, kid="k1")), "TOKEN_BAD_SIGNATURE")
    expect_unauthenticated(channel, bearer(mint_token(secret=OTHER_APP_SECRET)), "TOKEN_BAD_SIGNATURE")


def test_an_expired_token_within_no_skew(channel):
    # One second past exp is expired: the default skew is 0.
    expect_unauthenticated(channel, bearer(mint_token(exp_in=-1)), "TOKEN_EXPIRED")


def test_a_token_both_expired_and_not_yet_valid_is_expired(channel):
    # Both time faults at once: expiry is checked first, so the reason does not depend on the clock.
    info = expect_unauthenticated(channel, bearer(mint_token(exp_in=-60, claims={"nbf": int(time.time()) + 60})),
                                  "TOKEN_EXPIRED")
    assert info.domain == "groupd"


@pytest.mark.parametrize("rpc", ["RevokeGroup", "ImportGroup", "SendSystemNotification"])
def test_admin_only_rpcs_refuse_a_user_token(channel, rpc):
    from groupd.v1 import common_pb2, message_pb2, message_pb2_grpc

    groups = group_pb2_grpc.GroupServiceStub(channel)
    messages = message_pb2_grpc.MessageServiceStub(channel)
    calls = {
        "RevokeGroup": lambda md: groups.RevokeGroup(group_pb2.RevokeGroupRequest(group_id="any"), metadata=md, timeout=10),
        "ImportGroup": lambda md: groups.ImportGroup(group_pb2.ImportGroupRequest(
            group_id="imported-by-a-user", type=common_pb2.GROUP_TYPE_PUBLIC, owner_user_id="alice",
            profile=common_pb2.GroupProfile(name="x")), metadata=md, timeout=10),
        "SendSystemNotification": lambda md: messages.SendSystemNotification(
            message_pb2.SendSystemNotificationRequest(group_id="any", text="x"), metadata=md, timeout=10),
    }
    with pytest.raises(grpc.RpcError) as caught:
        calls[rpc](user_md("alice"))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value
    assert error_info(caught.value).reason == "ADMIN_TOKEN_REQUIRED"
    # An admin token acting for a user is that user: refused as well.
    from support import admin_md
    with pytest.raises(grpc.RpcError) as caught:
        calls[rpc](admin_md(operator="alice"))
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, caught.value
    assert error_info(caught.value).reason == "ADMIN_TOKEN_REQUIRED"


def signed(header, payload, spell_signature=None):
    """An HS256 token over `header` and `payload` (dicts), the signature spelt by `spell_signature`
    (bytes → text; base64url without padding by default)."""
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(payload).encode())
    signature = hmac.new(APP_SECRET.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + (spell_signature or b64url)(signature)


def good_payload(**changes):
    payload = {"app": APP_ID, "sub": "alice", "role": "user", "exp": int(time.time()) + 3600}
    payload.update(changes)
    return payload


def test_one_spelling_per_token(channel):
    header = {"alg": "HS256", "typ": "JWT"}
    # A payload whose signature has a character that base64url and standard base64 spell apart.
    payload = next(p for p in (good_payload(n=n) for n in range(1000)) if set(signed(header, p).split(".")[2]) & set("-_"))
    # The spelling RFC 7515 allows passes...
    call_get_groups_info(channel, bearer(signed(header, payload)))
    # ...and the same signature re-spelt is refused: padded, standard base64, set trailing bits.
    padded = lambda raw: base64.urlsafe_b64encode(raw).decode()
    standard = lambda raw: base64.b64encode(raw).decode().rstrip("=")
    for spell in [padded, standard]:
        token = signed(header, payload, spell)
        assert token != signed(header, payload)
        expect_unauthenticated(channel, bearer(token), "TOKEN_MALFORMED")
    canonical = signed(header, payload)
    last = canonical[-1]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    # 32 bytes are 43 characters: the last one carries 4 bits, its 2 low bits are unused.
    respelt = canonical[:-1] + alphabet[alphabet.index(last) | 1]
    assert base64.urlsafe_b64decode(respelt.split(".")[2] + "=") == base64.urlsafe_b64decode(canonical.split(".")[2] + "=")
    expect_unauthenticated(channel, bearer(respelt), "TOKEN_MALFORMED")
    # A standard-base64 character anywhere, or padding in the header, is refused too.
    expect_unauthenticated(channel, bearer(canonical.replace("-", "+", 1) if "-" in canonical else "+" + canonical), "TOKEN_MALFORMED")
    head, rest = canonical.split(".", 1)
    expect_unauthenticated(channel, bearer(head + "==." + rest), "TOKEN_MALFORMED")


def test_kid_must_be_a_string(channel):
    expect_unauthenticated(channel, bearer(signed({"alg": "HS256", "kid": 1}, good_payload())), "TOKEN_MALFORMED")
    call_get_groups_info(channel, bearer(signed({"alg": "HS256", "kid": "k1"}, good_payload())))


@pytest.mark.parametrize("sub", ["u" * 65, "u" * 10_000, "tab\there"], ids=["65 bytes", "10 KB", "a control character"])
def test_sub_obeys_the_user_id_rules(channel, sub):
    info = expect_unauthenticated(channel, bearer(signed({"alg": "HS256"}, good_payload(sub=sub))), "TOKEN_MALFORMED")
    assert info.metadata["claim"] == "sub" and info.metadata["limit"] == "64"
    call_get_groups_info(channel, bearer(signed({"alg": "HS256"}, good_payload(sub="u" * 64))))
