<?php

declare(strict_types=1);

// examples/callback.php served by `php -S`, answering like examples/c/callback_cgi.c: driven
// by `slotpartner-sandbox send` and by raw HTTP requests compared with tests/c/expected/cgi_*.out.
// Every answer is the library's (SlotPartner\Endpoint); the example's own log line names the
// event, its player and its index.

require __DIR__ . '/helper.php';

const EXAMPLE = PACKAGE . '/examples/callback.php';
const FFI_ON = ['-d', 'ffi.enable=1'];

/**
 * The status, extra header and body of tests/c/expected/cgi_NAME.out.
 *
 * @return array{0: int, 1: ?string, 2: string}
 */
function expected(string $name): array
{
    $text = (string) file_get_contents(EXPECTED . '/cgi_' . $name . '.out');
    if (preg_match('/\AStatus: (\d{3}) [^\n]*\n(Allow: POST\n)?Content-Type: application\/json; charset=utf-8\n\n(.*)exit: 0\n?\z/s', $text, $m) !== 1) {
        throw new RuntimeException('unexpected format of cgi_' . $name . '.out');
    }
    return [(int) $m[1], $m[2] === '' ? null : 'POST', $m[3]];
}

/**
 * Sends one request and compares status, Content-Type, Allow and body with cgi_NAME.out.
 *
 * @param array<string, string> $replace
 * @param array<string, string> $headers more request headers
 */
function compareWithCgi(PhpServer $server, string $name, string $method, ?string $token, string $body, array $replace = [], array $headers = []): void
{
    [$status, $allow, $expectedBody] = expected($name);
    $expectedBody = strtr($expectedBody, $replace);
    $answer = httpRequest($server->port, $method, $body, ($token === null ? [] : ['X-Service-Token' => $token]) + $headers);
    if ($answer === null) {
        T::fail($name . ': no answer');
        return;
    }
    [$gotStatus, $headers, $gotBody] = $answer;
    T::eq($status, $gotStatus, $name . ': status');
    T::eq($expectedBody, $gotBody, $name . ': body');
    T::eq('application/json; charset=utf-8', $headers['content-type'] ?? null, $name . ': content type');
    T::eq($allow, $headers['allow'] ?? null, $name . ': Allow header');
}

/** Runs `slotpartner-sandbox send` against $url; returns [exit status, output]. */
function send(string $url, array $args): array
{
    $process = proc_open(array_merge([SANDBOX, 'send', '--url', $url], $args), [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    if ($process === false) {
        throw new RuntimeException('cannot run the sandbox');
    }
    $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    return [proc_close($process), (string) $out];
}

$big = str_repeat(' ', 70000);
// The derived bodies of tests/c/run_examples.sh.
$indexString = (string) preg_replace('/"index": *[0-9]*/', '"index":"42"', fixture('payout.json'));
$balanceUnknown = (string) preg_replace('/"playerPartnerIdentifier":"[^"]*"/', '"playerPartnerIdentifier":"unknown-player"', fixture('balance.json'));
$server = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1'], FFI_ON);

T::test('answers like the CGI example', function () use ($server, $big): void {
    compareWithCgi($server, 'get_refused', 'GET', TOKEN, '');
    compareWithCgi($server, 'no_token', 'POST', null, fixture('refund.json'));
    compareWithCgi($server, 'wrong_token', 'POST', OTHER_TOKEN, fixture('refund.json'));
    compareWithCgi($server, 'too_large', 'POST', TOKEN, $big);
    compareWithCgi($server, 'not_json', 'POST', TOKEN, fixture('not_json.json'));
    compareWithCgi($server, 'not_object', 'POST', TOKEN, fixture('not_object.json'));
    compareWithCgi($server, 'unknown_event', 'POST', TOKEN, fixture('other_event.json'));
    compareWithCgi($server, 'invalid_payout', 'POST', TOKEN, fixture('invalid_money_float.json'));
    compareWithCgi($server, 'invalid_refund', 'POST', TOKEN, fixture('invalid_string_id.json'));
    compareWithCgi($server, 'invalid_balance', 'POST', TOKEN, fixture('invalid_no_player.json'));
    compareWithCgi($server, 'refund', 'POST', TOKEN, fixture('refund.json'));
    compareWithCgi($server, 'payout', 'POST', TOKEN, fixture('payout.json'));
    compareWithCgi($server, 'balance', 'POST', TOKEN, fixture('balance.json'));
});

T::test('the review cases answer like the CGI', function () use ($server, $indexString, $balanceUnknown): void {
    $before = count($server->scriptLog());
    compareWithCgi($server, 'index_string', 'POST', TOKEN, $indexString);
    T::eq(['callback.php: jackpotPayout for player partner-42, index unreadable "42"'], array_slice($server->scriptLog(), $before), 'the unreadable index logged');
    compareWithCgi($server, 'balance_unknown_player', 'POST', TOKEN, $balanceUnknown);
    compareWithCgi($server, 'upper_case_token', 'POST', strtoupper(TOKEN), fixture('refund.json'));
    $strict = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_STRICT_INDEX' => '1'], FFI_ON);
    compareWithCgi($strict, 'index_string_strict', 'POST', TOKEN, $indexString);
    $strict->stop();
    // X-Forwarded-For passed on as the bytes received: ignored from an untrusted peer...
    $untrusted = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_TRUSTED_PROXIES' => '10.0.0.0/8'], FFI_ON);
    compareWithCgi($untrusted, 'forwarded_not_utf8_untrusted', 'POST', TOKEN, fixture('refund.json'), [], ['X-Forwarded-For' => "\xFF\xFE"]);
    $untrusted->stop();
    // ... refused as a forbidden source from a trusted proxy (here the peer 127.0.0.1).
    $trusted = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => 'staging', 'SLOTPARTNER_TRUSTED_PROXIES' => '127.0.0.0/8'], FFI_ON);
    compareWithCgi($trusted, 'forwarded_not_utf8_trusted', 'POST', TOKEN, fixture('refund.json'), ['10.0.0.5' => '127.0.0.1'], ['X-Forwarded-For' => "\xFF\xFE"]);
    $trusted->stop();
});

T::test('one log line per valid event, naming its index, through error_log', function () use ($server): void {
    $refusals = count($server->scriptLog('refused: '));
    foreach (['refund' => 41, 'payout' => 42, 'balance' => 43] as $kind => $index) {
        $before = count($server->scriptLog());
        $answer = httpRequest($server->port, 'POST', fixture($kind . '.json'), ['X-Service-Token' => TOKEN]);
        T::eq(200, $answer[0] ?? null, $kind . ': status');
        $lines = array_slice($server->scriptLog(), $before);
        T::eq(1, count($lines), $kind . ': one log line, got ' . json_encode($lines));
        T::true(str_ends_with($lines[0] ?? '', ', index ' . $index), $kind . ': naming the index: ' . ($lines[0] ?? ''));
    }
    $lines = $server->scriptLog();
    T::true(in_array('callback.php: jackpotPayout for player partner-42, index 42', $lines, true), 'the payout line');
    T::eq($refusals, count($server->scriptLog('refused: ')), 'no refusal logged');
});

T::test('driven by slotpartner-sandbox send', function () use ($server): void {
    foreach (['refund', 'payout', 'balance'] as $kind) {
        [$rc, $out] = send($server->url, ['--expect-success', 'true', $kind]);
        T::eq(0, $rc, $kind . ': send exit status (' . trim($out) . ')');
        T::true(str_contains($out, 'verdict=ok'), $kind . ': verdict ok');
    }
    [$rc, $out] = send($server->url, ['--set', 'moneyWon=1500.5', '--expect-success', 'false', 'payout']);
    T::eq(0, $rc, 'invalid payout: send exit status (' . trim($out) . ')');
    T::true(str_contains($out, 'body={"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}} verdict=ok'), 'invalid payout answered with success false: ' . trim($out));
    [$rc, $out] = send($server->url, ['--count', '3', '--expect-success', 'true', 'refund']);
    T::eq(0, $rc, 'three refunds in a row (' . trim($out) . ')');
    [$rc] = send($server->url, ['--expect-success', 'false', 'refund']);
    T::eq(1, $rc, 'send itself fails when the verdict is wrong (the check can fail)');
    [$rc, $out] = send($server->url, ['--token', OTHER_TOKEN, '--expect-http', '401', 'raw', '--body-file', FIXTURES . '/refund.json']);
    T::eq(0, $rc, 'wrong token answered 401 (' . trim($out) . ')');
});

T::test('CONTENT_LENGTH cases', function () use ($server): void {
    // php -S refuses these itself, closing the connection before the script runs.
    T::eq(null, httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN], '12x'), 'php -S: malformed Content-Length, no answer');
    T::eq(null, httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN], '100000'), 'php -S: body shorter than Content-Length, no answer');
    // Behind a server that passes them on (CGI-style variables), the script answers like the CGI.
    foreach (['bad_length' => '12x', 'short_body' => '100000'] as $name => $length) {
        [$status, , $body] = expected($name);
        [$rc, $out, $err] = runPhp(['-d', 'ffi.enable=1', __DIR__ . '/cgi_env.php'], [
            'SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => 'staging', 'REQUEST_METHOD' => 'POST',
            'CONTENT_LENGTH' => $length, 'REMOTE_ADDR' => '34.254.138.20', 'HTTP_X_SERVICE_TOKEN' => TOKEN,
        ]);
        T::eq(0, $rc, $name . ': exit status');
        T::eq($body, $out, $name . ': body');
        T::true(str_contains($err, 'status: ' . $status), $name . ': status ' . $status . ' (' . trim($err) . ')');
    }
});
$server->stop();

T::test('sources: a CIDR range, staging, the default', function (): void {
    $range = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.0/24'], FFI_ON);
    compareWithCgi($range, 'custom_range', 'POST', TOKEN, fixture('refund.json'));
    $range->stop();
    // The CGI case comes from 18.203.30.17; here the peer is 127.0.0.1.
    $staging = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => 'staging'], FFI_ON);
    compareWithCgi($staging, 'forbidden_source', 'POST', TOKEN, fixture('refund.json'), ['18.203.30.17' => '127.0.0.1']);
    $staging->stop();
    $default = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN], FFI_ON, ['SLOTPARTNER_SOURCES']);
    compareWithCgi($default, 'forbidden_source', 'POST', TOKEN, fixture('refund.json'), ['18.203.30.17' => '127.0.0.1']);
    $default->stop();
});

T::test('no token configured: the CGI program\'s answer in PHP\'s words, and a hint in the log', function (): void {
    $server = new PhpServer(EXAMPLE, [], FFI_ON, ['SLOTPARTNER_TOKEN']);
    $answer = httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
    $server->stop();
    T::eq(500, $answer[0] ?? null, 'status');
    // The caller, not yet authenticated, is told nothing of the setting; the log names it.
    T::eq('{"error":{"code":"invalid_argument","field":"","message":"the partner is misconfigured; its log says how"}}', $answer[2] ?? null, 'body');
    T::eq(['configuration: token: no partner token is configured (is SLOTPARTNER_TOKEN set?)'], $server->scriptLog('configuration: '), 'the log asks for the variable');
    // (proc_open drops an empty variable: a malformed token stands for one that is set.)
    $set = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => 'not-a-uuid'], FFI_ON);
    $answer = httpRequest($set->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
    $set->stop();
    T::eq(500, $answer[0] ?? null, 'a token set but malformed: status');
    $log = implode("\n", $set->scriptLog('configuration: '));
    T::true(str_contains($log, 'configuration: token: ') && !str_contains($log, 'SLOTPARTNER_TOKEN'), 'a token set: no hint about the variable: ' . $log);
    $cgi = ROOT . '/target/examples/callback_cgi';
    if (!is_executable($cgi)) {
        T::fail($cgi . ' is missing: run make');
        return;
    }
    $process = proc_open([$cgi], [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes, null, ['REQUEST_METHOD' => 'POST', 'CONTENT_LENGTH' => '2', 'REMOTE_ADDR' => '127.0.0.1']);
    fwrite($pipes[0], '{}');
    fclose($pipes[0]);
    $out = (string) stream_get_contents($pipes[1]);
    fclose($pipes[1]);
    proc_close($process);
    // C is handed NULL: the library answers the same, nothing of the setting.
    T::eq("Status: 500 Internal Server Error\r\nContent-Type: application/json; charset=utf-8\r\n\r\n"
        . '{"error":{"code":"invalid_argument","field":"","message":"the partner is misconfigured; its log says how"}}', $out, 'the CGI program\'s answer');
});

// A journal whose PostgreSQL server cannot be reached (a closed port on loopback); its user and
// database are names no answer may show.
const UNREACHABLE_JOURNAL = 'postgres://sp_owner@127.0.0.1:1/sp_ledger';
const JOURNAL_SECRETS = ['postgres://', '127.0.0.1', 'sp_owner', 'sp_ledger'];

/**
 * Fails naming $what when $text holds anything of the journal's URL ($withHost false: a log,
 * which names the peer, 127.0.0.1 too, when it refuses its source).
 */
function namesNoJournal(string $text, string $what, bool $withHost = true): void
{
    foreach (JOURNAL_SECRETS as $secret) {
        if (!$withHost && $secret === '127.0.0.1') {
            continue;
        }
        T::true(!str_contains($text, $secret), $what . ': names ' . $secret . ': ' . $text);
    }
}

T::test('a request refused by the token or source check never makes the journal connect', function (): void {
    // A listener on loopback that nobody answers: a connection made to it waits in its backlog.
    $listener = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
    if ($listener === false) {
        T::fail('cannot listen: ' . $error);
        return;
    }
    $port = (int) substr((string) strrchr((string) stream_socket_get_name($listener, false), ':'), 1);
    $journal = 'postgres://sp_owner@127.0.0.1:' . $port . '/sp_ledger';
    $server = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_JOURNAL' => $journal], FFI_ON);
    $staging = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => 'staging', 'SLOTPARTNER_JOURNAL' => $journal], FFI_ON);
    try {
        compareWithCgi($server, 'no_token', 'POST', null, fixture('refund.json'));
        compareWithCgi($server, 'wrong_token', 'POST', OTHER_TOKEN, fixture('refund.json'));
        compareWithCgi($staging, 'forbidden_source', 'POST', TOKEN, fixture('refund.json'), ['18.203.30.17' => '127.0.0.1']);
        namesNoJournal(implode("\n", array_merge($server->scriptLog(''), $staging->scriptLog(''))), 'the log of the refusals', false);
    } finally {
        $server->stop();
        $staging->stop();
    }
    stream_set_blocking($listener, false);
    $connection = @stream_socket_accept($listener, 0);
    T::true($connection === false, 'no connection was made to the journal');
    fclose($listener);
});

T::test('an unreachable journal: 401 without the token, 503 with it, naming nothing of the journal', function (): void {
    $server = new PhpServer(EXAMPLE, ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1', 'SLOTPARTNER_JOURNAL' => UNREACHABLE_JOURNAL], FFI_ON);
    try {
        compareWithCgi($server, 'no_token', 'POST', null, fixture('refund.json'));
        namesNoJournal(implode("\n", $server->scriptLog('refused: ')), 'the log of the refusal');
        foreach ([1, 2] as $n) {  // a journal that cannot be opened is tried again by the next request
            $answer = httpRequest($server->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
            T::eq(503, $answer[0] ?? null, 'with the token: 503, request ' . $n);
            T::eq('application/json; charset=utf-8', $answer[1]['content-type'] ?? null, 'a JSON answer');
            T::true(is_array(json_decode($answer[2] ?? '', true)['error'] ?? null), 'a JSON error body: ' . ($answer[2] ?? ''));
            namesNoJournal($answer[2] ?? '', 'the 503 body');
        }
        $log = $server->scriptLog('journal: ');
        T::true(count($log) === 2 && str_contains($log[0], '127.0.0.1:1'), 'the URL is in the log: ' . json_encode($log));
    } finally {
        $server->stop();
    }
});

T::finish();
