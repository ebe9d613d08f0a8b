"""``shown_url``: the one mask for database URLs and endpoints. Laws: a password (in the
userinfo or a secret query parameter) never survives, showing is idempotent, and everything
else (scheme, user, host, path, other parameters, plain file paths) is kept as written."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from turnlog.journal import shown_url

#: passwords, written raw or percent-encoded; a raw ``?`` would start the query (not a password)
SECRETS = st.text(st.characters(codec="utf-8", exclude_characters="\x00?"), min_size=6,
                  max_size=30)
NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
HOSTS = st.sampled_from(["db.example", "127.0.0.1:5432", "[::1]:5432", "", "h"])


@given(scheme=st.sampled_from(["postgresql", "postgres", "http", "https"]), user=NAMES,
       password=SECRETS, host=HOSTS, path=st.sampled_from(["", "/turnlog", "/v1/traces"]),
       raw=st.booleans())
@example(scheme="postgresql", user="me", password="p@ss/w:rd#x", host="h", path="/db", raw=True)
def test_a_userinfo_password_never_shows_and_the_rest_does(scheme, user, password, host, path,
                                                           raw):
    secret = password if raw else quote(password, safe="")
    url = f"{scheme}://{user}:{secret}@{host}{path}?sslmode=require"
    shown = shown_url(url)
    assert shown == f"{scheme}://{user}:***@{host}{path}?sslmode=require"
    assert shown_url(shown) == shown


@given(key=st.sampled_from(["password", "sslpassword", "api_key", "token", "Secret", "pwd"]),
       value=SECRETS.map(lambda s: quote(s, safe="")))
def test_a_secret_query_parameter_is_masked_and_the_others_kept(key, value):
    url = f"postgresql:///turnlog?host=/run/pg&{key}={value}&application_name=x"
    assert shown_url(url) == f"postgresql:///turnlog?host=/run/pg&{key}=***&application_name=x"


@pytest.mark.parametrize("target", ["turnlog.db", "runs/a b@c:d.db", ":memory:",
                                    "sqlite:////tmp/x.db", "postgresql://me@h/db",
                                    "http://localhost:4318", "http://h/x?page=2&sort=id"])
def test_what_holds_no_secret_is_shown_as_written(target):
    assert shown_url(target) == target


@pytest.mark.parametrize("target", ["postgresql://u:sekret@[::1/db",  # a broken IPv6 host
                                    "postgresql://u:sekret@h:port/db",  # a port that is no number
                                    "my db://u:sekret@h"])  # a scheme that is no scheme
def test_a_url_that_does_not_parse_is_still_masked(target):
    shown = shown_url(target)
    assert "sekret" not in shown and "u:***@" in shown
