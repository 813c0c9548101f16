#!/usr/bin/env bash
# Token files of every shape, read by the one reader (common/net/auth.c) in
# serve, trainer and engine: one trailing "\n" or "\r\n" is dropped; an empty
# file, more lines, a NUL, spaces, a byte that is not printable ASCII or one
# over the length is refused at start naming the file and the problem; a
# file readable by group or others is warned about (docs/SECURITY.md).
source "$(dirname "$0")/lib.sh"

mk() { local f="$TMP/$1"; printf "$2" >"$f"; chmod 600 "$f"; echo "$f"; }
LONG=$(python3 -c 'print("t" * 600, end="")')
# name, printf text, the words the refusal must carry
BAD=("empty||is empty" "newline_only|\n|is empty" "two_lines|a\nb\n|more than one line"
    "two_newlines|tok\n\n|more than one line" "nul|a\000b|a NUL" "space|a b|white space"
    "leading_space| tok|white space" "tab|tok\t|white space" "not_ascii|t\303\251|not printable ASCII"
    "too_long|$LONG|is longer than")
for b in "${BAD[@]}"; do
    IFS='|' read -r name text why <<<"$b"
    f=$(mk "bad_$name" "$text")
    port=$(free_port)
    timeout 10 "$WSYNC" serve --listen "127.0.0.1:$port" --token-file "$f" >"$TMP/s.log" 2>&1; rc=$?
    [ $rc = 2 ] && grep -q "token file $f" "$TMP/s.log" && grep -q "$why" "$TMP/s.log" &&
        pass "serve_refuses_token_$name" || fail "serve_refuses_token_$name" "rc $rc: $(tail -2 "$TMP/s.log")"
    timeout 10 "$WSYNC" trainer --control "http://127.0.0.1:$port" --rank 0 --world 1 --synthetic 1M \
        --token-file "$f" >"$TMP/t.log" 2>&1; rc=$?
    [ $rc = 2 ] && grep -q "token file $f" "$TMP/t.log" && grep -q "$why" "$TMP/t.log" &&
        pass "trainer_refuses_token_$name" || fail "trainer_refuses_token_$name" "rc $rc: $(tail -2 "$TMP/t.log")"
    timeout 10 "$WSYNC" engine --control "http://127.0.0.1:$port" --engine e --local-rank 0 --local-world 1 \
        --token-file "$f" >"$TMP/e.log" 2>&1; rc=$?
    [ $rc = 2 ] && grep -q "token file $f" "$TMP/e.log" && grep -q "$why" "$TMP/e.log" &&
        pass "engine_refuses_token_$name" || fail "engine_refuses_token_$name" "rc $rc: $(tail -2 "$TMP/e.log")"
done
f=$TMP/missing
timeout 10 "$WSYNC" serve --listen "127.0.0.1:$(free_port)" --token-file "$f" >"$TMP/s.log" 2>&1; rc=$?
[ $rc != 0 ] && grep -q "token file $f: No such file" "$TMP/s.log" && pass serve_refuses_missing_token_file ||
    fail serve_refuses_missing_token_file "rc $rc: $(tail -2 "$TMP/s.log")"

# Good shapes: every process takes the same token from each, and it works
# on the wire (registrations are POSTs: they need it).
for g in "plain|tok-good" "lf|tok-good\n" "crlf|tok-good\r\n"; do
    IFS='|' read -r name text <<<"$g"
    f=$(mk "good_$name" "$text")
    port=$(free_port); U=http://127.0.0.1:$port
    bg "$WSYNC" serve --listen "127.0.0.1:$port" --token-file "$f" >"$TMP/s_$name.log" 2>&1
    S=$!
    wait_http "$U/healthz" || { fail "serve_takes_token_$name" "$(tail -2 "$TMP/s_$name.log")"; continue; }
    got=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer tok-good' -X POST "$U/v1/engines/register" \
        -d '{"id":"c","host":"h","local_ranks":1}')
    check "serve_takes_token_$name" [ "$got" = 200 ]
    P=$(free_port)
    bg "$WSYNC" trainer --control "$U" --rank 0 --world 1 --synthetic 1M --chunk 256K --versions 1 \
        --listen "127.0.0.1:$P" --advertise 127.0.0.1 --token-file "$f" >"$TMP/t_$name.log" 2>&1
    T=$!
    timeout 60 "$WSYNC" engine --control "$U" --engine e-$name --local-rank 0 --local-world 1 --versions 1 \
        --bind 127.0.0.1 --timeout-ms 30000 --token-file "$f" >"$TMP/e_$name.log" 2>&1; rc=$?
    [ $rc = 0 ] && pass "trainer_and_engine_take_token_$name" ||
        fail "trainer_and_engine_take_token_$name" "rc $rc: $(tail -2 "$TMP/e_$name.log") $(tail -2 "$TMP/t_$name.log")"
    kill $T $S 2>/dev/null
    wait $T $S 2>/dev/null
    ! grep -q 'readable by' "$TMP/s_$name.log" && pass "no_warning_for_mode_600_$name" ||
        fail "no_warning_for_mode_600_$name" "$(grep 'readable by' "$TMP/s_$name.log")"
done

# Readable by others: works, with a warning saying what to do.
f=$(mk open_token "tok-good\n")
chmod 644 "$f"
port=$(free_port)
bg "$WSYNC" serve --listen "127.0.0.1:$port" --token-file "$f" >"$TMP/s_open.log" 2>&1
wait_http "http://127.0.0.1:$port/healthz" && grep -q "token file $f is readable by every user (mode 644).*chmod 600" \
    "$TMP/s_open.log" && pass serve_warns_token_readable_by_others ||
    fail serve_warns_token_readable_by_others "$(tail -2 "$TMP/s_open.log")"
timeout 3 "$WSYNC" engine --control "http://127.0.0.1:1" --engine e --local-rank 0 --local-world 1 \
    --versions 1 --timeout-ms 500 --token-file "$f" >"$TMP/e_open.log" 2>&1
check engine_warns_token_readable_by_others grep -q "token file $f is readable by every user" "$TMP/e_open.log"
chmod 640 "$f"
timeout 3 "$WSYNC" trainer --control "http://127.0.0.1:1" --rank 0 --world 1 --synthetic 1M --versions 1 \
    --token-file "$f" >"$TMP/t_open.log" 2>&1
check trainer_warns_token_readable_by_group grep -q "token file $f is readable by its group (mode 640)" "$TMP/t_open.log"
