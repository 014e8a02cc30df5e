<?php

declare(strict_types=1);

// SlotPartner\Endpoint behind nginx and PHP-FPM, as a partner runs it: the three front scripts
// of tests/fpm/ (Endpoint::serve(), the PSR-7 adapter with php-nyholm-psr7, the HttpFoundation
// adapter with php-symfony-http-foundation) and the README's whole endpoint as it stands (its
// logic fails on no demand and refuses unknown events) each through the same cases: 405, 401, 403 (a source
// behind the trusted proxy), 413, 400, a field error, a new refund and payout, a repeat
// byte-identical, a conflict 409, the logic's failure 503 with Retry-After then the redelivery
// credited once, an other event, a journal down (a closed port on loopback: a refund 503, a
// balance 200); then one `slotpartner recover` through the plain front. nginx's location is
// docs/deployment.md's block itself, with Debian's fastcgi_params. PHP-FPM preloads the
// binding as the README's production setup does. Every process is stopped at exit.

require __DIR__ . '/helper.php';

const NGINX = '/usr/sbin/nginx';
const DOCS = ROOT . '/docs/deployment.md';
const DOCS_MARKER = '<!-- nginx: php-fpm -->';
const DOCS_ROOT = '/srv/partner/public';
const DOCS_SOCKET = 'unix:/run/php/php8.2-fpm.sock';
const FRONTS = ['plain', 'psr7', 'httpfoundation', 'readme'];
const README = PACKAGE . '/README.md';
const OPERATOR = ROOT . '/target/release/slotpartner';

/** The nginx block of docs/deployment.md after DOCS_MARKER. */
function docsBlock(): string
{
    $text = (string) file_get_contents(DOCS);
    if (preg_match('/^' . preg_quote(DOCS_MARKER, '/') . '\n```nginx\n(.*?)\n```$/ms', $text, $m) !== 1) {
        throw new RuntimeException(DOCS . ': no ```nginx block after ' . DOCS_MARKER);
    }
    return $m[1];
}

/**
 * The README's whole endpoint (the first PHP block after "## The whole endpoint"), as a front
 * script: its Composer autoload replaced by the package's, with a balanceInCents() of its own.
 */
function readmeEndpoint(): string
{
    $text = (string) file_get_contents(README);
    if (preg_match('/^## The whole endpoint\n.*?^```php\n(.*?)^```$/ms', $text, $m) !== 1) {
        throw new RuntimeException(README . ': no PHP block under "## The whole endpoint"');
    }
    return replaceOnce($m[1], "require 'vendor/autoload.php';", "require '" . PACKAGE . "/autoload.php';\n"
        . 'function balanceInCents(?string $player): int { return 100000; }');
}

/** $block with $from replaced by $to, which must occur exactly once. */
function replaceOnce(string $block, string $from, string $to): string
{
    if (substr_count($block, $from) !== 1) {
        throw new RuntimeException('the docs\' nginx block must name ' . $from . ' once: ' . $block);
    }
    return str_replace($from, $to, $block);
}

/**
 * A server started in a process group of its own (setsid), its output in $log: stop() sends
 * $signal to the group, waits, kills what is left and returns once none of it is left.
 */
final class GroupServer
{
    /** @var resource|null */
    private $process;
    public readonly int $group;

    /** @param list<string> $command */
    public function __construct(public readonly string $name, array $command, public readonly string $log, private readonly int $signal)
    {
        $process = proc_open(array_merge(['setsid'], $command), [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']], $pipes, null, ['PATH' => '/usr/sbin:/usr/bin:/sbin:/bin', 'LANG' => 'C.UTF-8']);
        if ($process === false) {
            throw new RuntimeException('cannot start ' . $name);
        }
        $this->process = $process;
        $this->group = proc_get_status($process)['pid'];
        atExit(fn () => $this->stop());
    }

    public function running(): bool
    {
        return $this->process !== null && proc_get_status($this->process)['running'];
    }

    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        $process = $this->process;
        $this->process = null;
        posix_kill(-$this->group, $this->signal);
        $deadline = microtime(true) + 10;
        while (proc_get_status($process)['running'] && microtime(true) < $deadline) {
            usleep(20_000);
        }
        if (processGroupMembers($this->group) !== []) {
            posix_kill(-$this->group, SIGKILL);
        }
        proc_close($process);
        $deadline = microtime(true) + 10;
        while (($left = processGroupMembers($this->group)) !== []) {
            if (microtime(true) > $deadline) {
                throw new RuntimeException($this->name . ': processes ' . implode(', ', $left) . ' outlived SIGKILL');
            }
            usleep(20_000);
        }
    }
}

/** Runs $command as root, or as the servers' user (nobody) when $asServer and we are root. */
function run(array $command, bool $asServer = false, array $env = []): array
{
    $prefix = $asServer && posix_geteuid() === 0 ? ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--'] : [];
    $process = proc_open(array_merge($prefix, $command), [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, array_merge(getenv(), $env));
    if ($process === false) {
        throw new RuntimeException('cannot run ' . $command[0]);
    }
    $out = (string) stream_get_contents($pipes[1]);
    $err = (string) stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    return [proc_close($process), $out, $err];
}

/** Hands $path to the servers' user when we are root. */
function give(string $path): void
{
    if (posix_geteuid() === 0) {
        chown($path, 'nobody');
        chgrp($path, 'nogroup');
    }
}

/** Makes the journal at $url with the ledger's table, as the servers' user; the rows of $sql. */
function ledger(string $url, string $sql, bool $create = false): array
{
    $code = 'require "' . PACKAGE . '/autoload.php";' . ($create ? 'new SlotPartner\\Journal($argv[1]);' : '')
        . 'echo json_encode((new PDO($argv[1]))->query($argv[2])->fetchAll(PDO::FETCH_NUM));';
    [$rc, $out, $err] = run([PHP_BINARY, '-d', 'ffi.enable=1', '-r', $code, $url, $sql], true, ['SLOTPARTNER_LIB' => ROOT . '/target/release/libslotpartner.so']);
    if ($rc !== 0) {
        throw new RuntimeException('ledger: ' . $out . $err);
    }
    return json_decode($out, true);
}

function credits(string $url): array
{
    return ledger($url, 'SELECT kind, transaction_id, amount FROM credits ORDER BY kind, transaction_id');
}

foreach ([NGINX => 'nginx', '/usr/sbin/php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION => 'php' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION . '-fpm', '/usr/share/php/Nyholm/Psr7/autoload.php' => 'php-nyholm-psr7', '/usr/share/php/Symfony/Component/HttpFoundation/autoload.php' => 'php-symfony-http-foundation', OPERATOR => 'the operator command (make)'] as $file => $package) {
    if (!is_file($file)) {
        T::fail('missing ' . $file . ': install ' . $package);
        T::finish();
    }
}

// The pools: "ok" with a SQLite journal holding the ledger, "down" with a PostgreSQL journal on
// a closed port, "recovery" with a journal of its own (first index 1) for the recovery run.
$dir = tempDir();
chmod($dir, 0755);
give($dir);
$closed = freePort();   // bound then released: nothing listens there
$journals = [
    'ok' => 'sqlite:' . $dir . '/journal.db',
    'down' => 'postgres://sp_owner@127.0.0.1:' . $closed . '/sp_ledger?connect_timeout=2',
    'recovery' => 'sqlite:' . $dir . '/recovery.db',
];
ledger($journals['ok'], 'CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))', true);
ledger($journals['recovery'], 'CREATE TABLE credits (kind TEXT NOT NULL, transaction_id INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (kind, transaction_id))', true);
$failFile = $dir . '/fail';
$root = posix_geteuid() === 0;
$version = PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION;

$ini = ['opcache.enable=1', 'opcache.enable_cli=0', 'opcache.preload=' . PACKAGE . '/preload.php', 'ffi.enable=preload',
    'display_errors=0', 'log_errors=1', 'error_log=' . $dir . '/php-errors.log'];
if ($root) {
    // The master runs as root: the scope comes from ffi.preload (README, "Preloading").
    [$rc, $out, $err] = run([PHP_BINARY, PACKAGE . '/bin/slotpartner-preload-header', $dir . '/preload.h'], false, ['SLOTPARTNER_LIB' => ROOT . '/target/release/libslotpartner.so']);
    if ($rc !== 0) {
        throw new RuntimeException('slotpartner-preload-header: ' . $out . $err);
    }
    chmod($dir . '/preload.h', 0644);
    $ini[] = 'opcache.preload_user=nobody';
    $ini[] = 'ffi.preload=' . $dir . '/preload.h';
}
file_put_contents($dir . '/php.ini', implode("\n", $ini) . "\n");
$fpm = ['[global]', 'pid = ' . $dir . '/fpm.pid', 'error_log = ' . $dir . '/fpm-errors.log', 'daemonize = no'];
foreach ($journals as $pool => $journal) {
    $fpm = array_merge($fpm, ['[' . $pool . ']', 'listen = ' . $dir . '/' . $pool . '.sock', 'listen.mode = 0660', 'pm = static', 'pm.max_children = 2',
        'clear_env = yes', 'catch_workers_output = yes', 'decorate_workers_output = no',
        'env[SLOTPARTNER_LIB] = "' . ROOT . '/target/release/libslotpartner.so"',
        'env[SLOTPARTNER_TOKEN] = ' . TOKEN, 'env[SLOTPARTNER_SOURCES] = 127.0.0.1', 'env[SLOTPARTNER_TRUSTED_PROXIES] = 127.0.0.1',
        'env[SLOTPARTNER_JOURNAL] = "' . $journal . '"', 'env[FPM_TEST_FAIL_FILE] = "' . $failFile . '"']);
    if ($pool === 'recovery') {
        $fpm[] = 'env[SLOTPARTNER_FIRST_INDEX] = 1';
    }
    if ($root) {
        $fpm = array_merge($fpm, ['user = nobody', 'group = nogroup', 'listen.owner = nobody', 'listen.group = nogroup']);
    }
}
file_put_contents($dir . '/fpm.conf', implode("\n", $fpm) . "\n");

// nginx: a server a front and pool, each the docs' block with its folder and socket.
copy('/etc/nginx/fastcgi_params', $dir . '/fastcgi_params');
$block = docsBlock();
mkdir($dir . '/readme');
file_put_contents($dir . '/readme/callback.php', readmeEndpoint());
T::test('the README shows the docs\' nginx block', function () use ($block): void {
    T::true(str_contains((string) file_get_contents(README), "```nginx\n" . $block . "\n```"), 'the same block in README.md');
});
$ports = [];
$servers = '';
foreach (FRONTS as $front) {
    foreach (array_keys($journals) as $pool) {
        $port = $ports[$front][$pool] = freePort();
        $folder = $front === 'readme' ? $dir . '/readme' : __DIR__ . '/fpm/' . $front;
        $location = replaceOnce(replaceOnce($block, DOCS_ROOT, $folder), DOCS_SOCKET, 'unix:' . $dir . '/' . $pool . '.sock');
        $servers .= "    server {\n        listen 127.0.0.1:" . $port . ";\n        client_max_body_size 1m;\n        " . str_replace("\n", "\n        ", $location) . "\n    }\n";
    }
}
mkdir($dir . '/nginx-temp');
give($dir . '/nginx-temp');
file_put_contents($dir . '/nginx.conf', ($root ? "user nobody nogroup;\n" : '') . "worker_processes 1;\ndaemon off;\npid " . $dir . "/nginx.pid;\nerror_log " . $dir . "/nginx-errors.log warn;\n"
    . "events { worker_connections 64; }\nhttp {\n    access_log off;\n    client_body_temp_path " . $dir . "/nginx-temp/body;\n    fastcgi_temp_path " . $dir . "/nginx-temp/fastcgi;\n"
    . "    proxy_temp_path " . $dir . "/nginx-temp/proxy;\n    uwsgi_temp_path " . $dir . "/nginx-temp/uwsgi;\n    scgi_temp_path " . $dir . "/nginx-temp/scgi;\n" . $servers . "}\n");

$started = microtime(true);
$fpmServer = new GroupServer('php-fpm', ['/usr/sbin/php-fpm' . $version, '-F', '-y', $dir . '/fpm.conf', '-c', $dir . '/php.ini'], $dir . '/fpm.log', SIGQUIT);
waitFor(static function () use ($dir, $journals, $fpmServer): bool {
    if (!$fpmServer->running()) {
        throw new RuntimeException('php-fpm exited: ' . file_get_contents($dir . '/fpm.log') . @file_get_contents($dir . '/fpm-errors.log'));
    }
    foreach (array_keys($journals) as $pool) {
        if (!file_exists($dir . '/' . $pool . '.sock')) {
            return false;
        }
    }
    return true;
}, 20, 'php-fpm\'s sockets');
$nginx = new GroupServer('nginx', [NGINX, '-p', $dir, '-e', $dir . '/nginx-errors.log', '-c', $dir . '/nginx.conf'], $dir . '/nginx.log', SIGQUIT);
waitFor(static function () use ($ports, $nginx, $dir): bool {
    if (!$nginx->running()) {
        throw new RuntimeException('nginx exited: ' . file_get_contents($dir . '/nginx.log') . @file_get_contents($dir . '/nginx-errors.log'));
    }
    $socket = @stream_socket_client('tcp://127.0.0.1:' . $ports['plain']['ok'], $errno, $error, 0.2);
    if ($socket === false) {
        return false;
    }
    fclose($socket);
    return true;
}, 20, 'nginx');
T::test('nginx gave each front and pool a port of its own', function () use ($dir): void {
    // Two server blocks on one port: nginx only warns, and one answers for the other.
    $errors = (string) @file_get_contents($dir . '/nginx-errors.log');
    T::true(!str_contains($errors, 'conflicting server name'), 'no port given twice: ' . $errors);
});

/** One POST of $body to $port with the token (unless null) and more headers. */
function post(int $port, string $body, ?string $token = TOKEN, array $headers = []): array
{
    $answer = httpRequest($port, 'POST', $body, ($token === null ? [] : ['X-Service-Token' => $token]) + $headers, null, '/callback.php', false);
    if ($answer === null) {
        throw new RuntimeException('no answer from port ' . $port);
    }
    return $answer;
}

/** The payout fixture with transactionId $id, $amount and no index. */
function payout(int $id, int $amount = 150000): string
{
    $body = (string) preg_replace('/"transactionId": *[0-9]+/', '"transactionId":' . $id, fixture('payout.json'));
    $body = (string) preg_replace('/"moneyWon": *[0-9]+/', '"moneyWon":' . $amount, $body);
    return (string) preg_replace('/,? *"index": *[0-9]+/', '', $body);
}

$json = 'application/json; charset=utf-8';
foreach (FRONTS as $n => $front) {
    T::test($front . ': every answer of the endpoint behind nginx and PHP-FPM', function () use ($front, $n, $ports, $json, $journals, $failFile): void {
        $port = $ports[$front]['ok'];
        $get = httpRequest($port, 'GET', '', [], null, '/callback.php', false);
        T::eq([405, 'POST', $json], [$get[0] ?? null, $get[1]['allow'] ?? null, $get[1]['content-type'] ?? null], $front . ': GET 405 with Allow');
        $readme = $front === 'readme';   // the README's endpoint: no failure on demand, unknown events refused
        T::eq(401, post($port, fixture('refund.json'), null)[0], $front . ': no token 401');
        T::eq(401, post($port, fixture('refund.json'), OTHER_TOKEN)[0], $front . ': wrong token 401');
        T::eq(403, post($port, fixture('refund.json'), TOKEN, ['X-Forwarded-For' => '10.0.0.5'])[0], $front . ': a source behind the trusted proxy that is not allowed: 403');
        T::eq(413, post($port, str_repeat(' ', 70000))[0], $front . ': 413');
        T::eq(400, post($port, fixture('not_json.json'))[0], $front . ': not JSON 400');
        $invalid = post($port, fixture('invalid_money_float.json'));
        T::eq([200, '{"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}'], [$invalid[0], $invalid[2]], $front . ': a field error, 200 success false');
        $base = 100 + 10 * $n;
        $refund = (string) preg_replace('/"transactionId": *[0-9]+/', '"transactionId":' . $base, fixture('refund.json'));
        $new = post($port, $refund);
        T::eq([200, '{"refund":{"success":true,"errorMessage":""}}', $json], [$new[0], $new[2], $new[1]['content-type'] ?? null], $front . ': a new refund');
        $repeat = post($port, $refund);
        T::eq([200, $new[2]], [$repeat[0], $repeat[2]], $front . ': its repeat, byte-identical');
        T::eq(200, post($port, payout($base + 1, 700))[0], $front . ': a new payout');
        $conflict = post($port, payout($base + 1, 701));
        T::eq(409, $conflict[0], $front . ': the same transactionId with another amount: 409');
        if (!$readme) {
            touch($failFile);
            give($failFile);
            $failed = post($port, payout($base + 2, 900));
            T::eq([503, '5'], [$failed[0], $failed[1]['retry-after'] ?? null], $front . ': the logic fails: 503 with Retry-After');
            T::true(!file_exists($failFile), $front . ': the failure was the logic\'s');
        }
        T::eq(200, post($port, payout($base + 2, 900))[0], $front . ': delivered again: 200');
        T::eq(200, post($port, payout($base + 2, 900))[0], $front . ': and again: the stored reply');
        $other = post($port, fixture('other_event.json'));
        T::eq($readme ? 400 : 200, $other[0], $front . ': an other event: ' . ($readme ? 'refused' : 'the logic\'s reply'));
        T::true($readme || str_starts_with($other[2], '{"other":'), $front . ': with the logic\'s reply: ' . $other[2]);
        $mine = array_values(array_filter(credits($journals['ok']), static fn (array $row): bool => $row[1] >= $base && $row[1] < $base + 10));
        T::eq([['payout', $base + 1, 700], ['payout', $base + 2, 900], ['refund', $base, 0]], $mine, $front . ': each credited once, the failed one after its redelivery');
        $down = $ports[$front]['down'];
        $refused = post($down, $refund);
        T::eq([503, '5'], [$refused[0], $refused[1]['retry-after'] ?? null], $front . ': the journal down: a refund 503 with Retry-After');
        T::true(!str_contains($refused[2], 'sp_owner') && !str_contains($refused[2], '127.0.0.1'), $front . ': the body names nothing of the journal: ' . $refused[2]);
        $balance = post($down, fixture('balance.json'));
        T::eq(200, $balance[0], $front . ': the journal down: a balance query 200');
        T::true(str_contains($balance[2], '"money":100000'), $front . ': with the balance: ' . $balance[2]);
    });
}

T::test('the log: one line a refusal, none for a success, through error_log', function () use ($dir): void {
    $log = (string) @file_get_contents($dir . '/php-errors.log') . (string) @file_get_contents($dir . '/fpm.log');
    T::true(str_contains($log, 'refused: '), 'refusals logged: ' . substr($log, -600));
    T::true(str_contains($log, 'RuntimeException: the ledger is down'), 'the logic\'s failure logged with its class and message');
    T::true(!str_contains($log, 'PHP Fatal') && !str_contains($log, 'PHP Warning'), 'no fatal and no warning: ' . substr($log, -600));
});

T::test('slotpartner recover delivers the lost events through the plain endpoint', function () use ($ports, $journals, $dir): void {
    $url = 'http://127.0.0.1:' . $ports['plain']['recovery'] . '/callback.php';
    $events = 12;
    [$rc, $out] = run([SANDBOX, 'send', '--url', $url, '--token', TOKEN, '--burst', (string) $events, '--seed', '7', '--lose', '0.25', '--repeat', '0.2', '--report-json', $dir . '/report.json', '--quiet', 'mixed']);
    T::eq(0, $rc, 'the burst: every reply well formed, each repeat byte-identical: ' . substr($out, -600));
    $report = json_decode((string) file_get_contents($dir . '/report.json'), true);
    T::true(($report['lost'] ?? 0) > 0, 'the burst lost some: ' . json_encode($report['lost'] ?? null));
    $sandbox = new Sandbox($events, 7);
    $env = ['SLOTPARTNER_JOURNAL' => $journals['recovery'], 'SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_CA_FILE' => $sandbox->caFile,
        'SLOTPARTNER_CALLBACK_URL' => $url, 'SLOTPARTNER_MIN_AGE' => '0s'];
    [$rc, $out, $err] = run([OPERATOR, 'recover', '--base-url', $sandbox->url], false, $env);
    T::eq(0, $rc, 'recover closes every gap: ' . $out . $err);
    [$rc, $out] = run([OPERATOR, 'journal', 'gaps'], false, $env);
    T::eq([0, ''], [$rc, trim($out)], 'no gap left');
    $sandbox->stop();
    $ids = array_map(static fn (array $row): int => (int) $row[1], credits($journals['recovery']));
    sort($ids);
    T::eq(range(900000001, 900000000 + $events), $ids, 'every index of the burst credited exactly once');
});

$nginx->stop();
$fpmServer->stop();
if (T::$failed > 0) {
    foreach (['fpm.log', 'fpm-errors.log', 'php-errors.log', 'nginx-errors.log'] as $name) {
        $lines = file($dir . '/' . $name, FILE_IGNORE_NEW_LINES) ?: [];
        echo '--- ', $name, " (its end)\n", implode("\n", array_slice($lines, -15)), "\n";
    }
}
echo 'nginx and PHP-FPM: ', round(microtime(true) - $started, 1), " s\n";
T::finish();
