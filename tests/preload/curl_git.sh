#!/bin/bash
# curl_git.sh - git's http transport (git-remote-http, libcurl's multi
# interface) under the shim: `git clone` over smart HTTP from a local git
# http-backend works unchanged, and every request it makes is settled
# exactly once - by the socket layer, since git drives curl_multi_perform
# (ADR-151) - so the upstream's request log and the shim's settlements
# agree. Against a server answering 500 the clone fails the way git
# always fails (exit 128, "returned error: 500"), and that request is
# settled once, as transient.
#
# A trip inside one git process is not tested: git-remote-http gives up
# after the first failed request, and breaker state does not outlive a
# process until RESILIX_STATE_FILE is implemented.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/curl_lib.sh"
rx_require_build
rx_need git python3
[ -x "$(git --exec-path)/git-http-backend" ] ||
	{ echo "SKIP: $RX_NAME: git http-backend is not installed"; exit 77; }
rx_usable git || rx_pass "git cannot run in this build"
rx_libcurl_tools_usable git-remote-http || rx_pass "skipped in this build"

# A repository with two commits, served bare.
export GIT_CONFIG_NOSYSTEM=1 HOME=$RX_TMP
git init -q "$RX_TMP/work" || rx_fail "git init"
(
	cd "$RX_TMP/work" &&
		echo one >a.txt && git add a.txt &&
		git -c user.name=t -c user.email=t@t commit -qm one &&
		seq 1 2000 >b.txt && git add b.txt &&
		git -c user.name=t -c user.email=t@t commit -qm two
) || rx_fail "git commit"
mkdir -p "$RX_TMP/srv"
git clone -q --bare "$RX_TMP/work" "$RX_TMP/srv/repo.git" || rx_fail "git clone --bare"

rx_pyup_start g --git-root "$RX_TMP/srv"
err=$RX_TMP/clone.err
rx_dump_on_fail "$err"
rx_shim RESILIX_LOG=debug git clone -q "http://127.0.0.1:$RX_PORT/repo.git" \
	"$RX_TMP/c1" 2>"$err" || rx_fail "git clone under the shim: exit $?"
rx_assert_eq "the clone has both commits" 2 \
	"$(git -C "$RX_TMP/c1" rev-list --count HEAD)"
rx_assert_eq "and the files" "2000" "$(wc -l <"$RX_TMP/c1/b.txt" | tr -d ' ')"
requests=$(rx_count g)
rx_assert_ge "requests upstream" "$requests" 2
rx_assert_eq "settlements = requests upstream (each attributed once)" \
	"$requests" "$(rx_settles "$err")"
rx_assert_eq "all of them successes" "$requests" \
	"$(grep 'event=settle ' "$err" | grep -c 'verdict=success')"
rx_upstream_stop g

rx_pyup_start f --git-root "$RX_TMP/srv" --rule /repo.git=500
err=$RX_TMP/fail.err
rx_dump_on_fail "$err"
rx_shim RESILIX_LOG=debug git clone -q "http://127.0.0.1:$RX_PORT/repo.git" \
	"$RX_TMP/c2" 2>"$err"
rx_assert_eq "git clone against 500s: git's own failure" 128 "$?"
rx_assert_grep "git says why" 'returned error: 500' "$err"
rx_assert_eq "requests upstream" 1 "$(rx_count f)"
rx_assert_eq "settled once, as transient" "1 1" \
	"$(rx_settles "$err") $(grep 'event=settle ' "$err" | grep -c 'verdict=transient')"
rx_pass
