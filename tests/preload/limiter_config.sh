#!/bin/bash
# limiter_config.sh - the limiter's variables are validated like the
# others (ADR-137): an invalid value prints exactly one line naming the
# variable, the value and what is accepted, and the shim passes everything
# through (16 calls at once to a 200 ms upstream all go, none waits or is
# shed, with a limit of 2 that would otherwise shed); valid settings take
# effect (the start line at debug shows them; RESILIX_LIMIT_MAX alone
# clamps the initial limit; RESILIX_LIMITER=off never sheds).
. "$(dirname "$0")/lib.sh"
rx_require_build

rx_upstream_start cfg --phases 0:ok:200

# run NAME VAR=VALUE...: 16 threads, one call each, under the shim.
run() {
	local name=$1
	shift
	out=$RX_TMP/$name.out err=$RX_TMP/$name.err
	rx_dump_on_fail "$out" "$err"
	rx_shim "$@" "$CLIENT" --port "$RX_PORT" --threads 16 >"$out" 2>"$err" ||
		rx_fail "$name: client exit status $?"
}

bad=(
	"RESILIX_LIMITER=fast|accepted: vegas, gradient2, aimd or off"
	"RESILIX_LIMITER=vegas2|accepted: vegas, gradient2, aimd or off"
	"RESILIX_LIMIT_MIN=0|accepted: integer 1..1000000"
	"RESILIX_LIMIT_MAX=-1|accepted: integer 1..1000000"
	"RESILIX_LIMIT_INITIAL=4.5|accepted: integer 1..1000000"
	"RESILIX_QUEUE_TIMEOUT_MS=1s|accepted: integer milliseconds 0..3600000"
	"RESILIX_LIMIT_STALE_MS=0|accepted: integer milliseconds 1..86400000"
	"RESILIX_LIMIT_INITIAL=2000|outside RESILIX_LIMIT_MIN..RESILIX_LIMIT_MAX"
	"RESILIX_LIMIT_MIN=9|is above RESILIX_LIMIT_MAX"
)
i=0
for c in "${bad[@]}"; do
	i=$((i + 1))
	set=${c%%|*} want=${c#*|}
	# A limit of 2 that would shed, then the bad value.
	extra=()
	[ "${set%%=*}" = RESILIX_LIMIT_MIN ] && [ "${set#*=}" = 9 ] &&
		extra=(RESILIX_LIMIT_MAX=8)
	run bad$i RESILIX_LIMIT_MIN=1 RESILIX_LIMIT_MAX=2 RESILIX_LIMIT_INITIAL=2 \
		RESILIX_QUEUE_TIMEOUT_MS=0 ${extra[@]+"${extra[@]}"} "$set"
	rx_assert_eq "$set: stderr lines" 1 "$(wc -l <"$err" | tr -d ' ')"
	rx_assert_grep "$set: the line names the variable" "${set%%=*}" "$err"
	rx_assert_grep "$set: the line says what is accepted" "$want" "$err"
	rx_assert_grep "$set: resilix is disabled" "all calls pass through" "$err"
	rx_assert_eq "$set: every call answered (pass-through)" 16 \
		"$(grep -c ' 200 OK 1$' "$out")"
done

# Valid: a limit of 2, never waiting: 14 of the 16 are shed.
run shed RESILIX_LIMIT_MIN=1 RESILIX_LIMIT_MAX=2 RESILIX_QUEUE_TIMEOUT_MS=0 \
	RESILIX_LOG=debug
rx_assert_grep "MAX alone clamps the initial limit" \
	'event=start .*limiter=vegas limit_min=1 limit_max=2 limit_initial=2 queue_timeout_ms=0' \
	"$err"
rx_assert_eq "limit 2, no waiting: calls answered" 2 \
	"$(grep -c ' 200 OK 1$' "$out")"
rx_assert_eq "limit 2, no waiting: calls shed" 14 \
	"$(grep -c ' 0 ECONNREFUSED 0$' "$out")"
rx_assert_no_grep "no warning about the limiter variables" \
	'not supported|not a resilix variable' "$err"

# Valid: RESILIX_LIMITER=off never sheds, whatever the bounds say.
run off RESILIX_LIMITER=off RESILIX_LIMIT_MIN=1 RESILIX_LIMIT_MAX=2 \
	RESILIX_QUEUE_TIMEOUT_MS=0 RESILIX_LOG=debug
rx_assert_grep "off: the start line says so" 'event=start .*limiter=off' "$err"
rx_assert_eq "off: calls answered" 16 "$(grep -c ' 200 OK 1$' "$out")"

# Valid: each algorithm is accepted.
for alg in vegas gradient2 aimd; do
	run $alg RESILIX_LIMITER=$alg RESILIX_LIMIT_STALE_MS=5000 \
		RESILIX_LIMIT_INITIAL=16 RESILIX_LOG=debug
	rx_assert_grep "$alg: accepted" "event=start .*limiter=$alg " "$err"
	rx_assert_eq "$alg: calls answered" 16 "$(grep -c ' 200 OK 1$' "$out")"
done
rx_pass
