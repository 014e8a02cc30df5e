<?php

declare(strict_types=1);

// opcache.preload=preload.php: the FFI scope "SLOTPARTNER" and the preloaded classes, under
// the CLI and under the built-in server (where ffi.enable=preload allows FFI only to preloaded
// code).

require __DIR__ . '/helper.php';

$isRoot = function_exists('posix_geteuid') && posix_geteuid() === 0;
$dir = tempDir();
$header = $dir . '/slotpartner-preload.h';

/**
 * PHP options for preloading: opcache.preload=preload.php under ffi.enable=preload, the scope
 * from ffi.preload when $header is given (else from FFI::load() in preload.php).
 *
 * @return list<string>
 */
function preloadArgs(?string $header, bool $asRoot, bool $cli = true): array
{
    $args = ['-d', 'opcache.enable=1', '-d', 'ffi.enable=preload', '-d', 'opcache.preload=' . PACKAGE . '/preload.php'];
    if ($cli) {
        $args = array_merge($args, ['-d', 'opcache.enable_cli=1']);
    }
    if ($asRoot) {
        // opcache refuses to preload as root without a user to preload as.
        $args = array_merge($args, ['-d', 'opcache.preload_user=root']);
    }
    if ($header !== null) {
        $args = array_merge($args, ['-d', 'ffi.preload=' . $header]);
    }
    return $args;
}

/** @return array<string, mixed>|null */
function probe(array $phpArgs, ?array $prefix = null): ?array
{
    [$rc, $out, $err] = runPhp(array_merge($phpArgs, [__DIR__ . '/preload_probe.php', FIXTURES . '/refund.json']), [], null, $prefix);
    $result = json_decode(trim($out), true);
    if ($rc !== 0 || !is_array($result)) {
        T::fail('probe failed (exit ' . $rc . '): ' . trim($out . ' ' . $err));
        return null;
    }
    return $result;
}

function checkProbe(?array $result, string $what): void
{
    T::eq(true, $result['preloaded'] ?? null, $what . ': classes preloaded');
    T::eq('scope', $result['source'] ?? null, $what . ': library from the FFI scope');
    T::eq('{"refund":{"success":true,"errorMessage":""}}', $result['reply'] ?? null, $what . ': a reply built');
    T::eq('preload', $result['ffi.enable'] ?? null, $what . ': under ffi.enable=preload');
    T::true(($result['preloadedClasses'] ?? 0) >= 15, $what . ': the binding\'s classes in opcache\'s preload statistics');
}

T::test('opcache is available', function (): void {
    [$rc, $out] = runPhp(['-r', 'echo extension_loaded("Zend OPcache") ? "yes" : "no";']);
    T::eq('yes', $out, 'Zend OPcache loaded (Debian: php8.2-opcache, a dependency of php8.2-cli)');
});

T::test('the preload header', function () use ($header): void {
    [$rc, , $err] = runPhp([PACKAGE . '/bin/slotpartner-preload-header', $header]);
    T::eq(0, $rc, 'slotpartner-preload-header exit status ' . $err);
    $text = (string) file_get_contents($header);
    T::eq("#define FFI_SCOPE \"SLOTPARTNER\"\n#define FFI_LIB \"" . realpath(ROOT . '/target/release/libslotpartner.so') . "\"\n", substr($text, 0, strpos($text, '/*') ?: 0), 'the two defines first');
    T::true(str_contains($text, 'enum sp_status sp_receiver_handle('), 'then the declarations');
    [$rc] = runPhp([PACKAGE . '/bin/slotpartner-preload-header']);
    T::eq(2, $rc, 'usage error');
});

T::test('CLI: scope from ffi.preload, classes from opcache.preload', function () use ($header, $isRoot): void {
    checkProbe(probe(preloadArgs($header, $isRoot)), 'ffi.preload');
});

T::test('CLI: scope from FFI::load() in preload.php', function () use ($isRoot): void {
    if (!$isRoot) {
        checkProbe(probe(preloadArgs(null, false)), 'FFI::load');
        return;
    }
    // As root, opcache preloads in a child running as opcache.preload_user, where FFI::load()
    // refuses to work: preload.php must say what to do instead.
    [$rc, $out, $err] = runPhp(array_merge(preloadArgs(null, true), [__DIR__ . '/preload_probe.php', FIXTURES . '/refund.json']));
    T::true($rc !== 0, 'as root without ffi.preload, the start fails');
    T::true(str_contains($out . $err, 'ffi.preload') && str_contains($out . $err, 'slotpartner-preload-header'), 'with the way out: ' . trim($out . $err));
    // The same as an unprivileged user, when one can read the checkout.
    $library = realpath(ROOT . '/target/release/libslotpartner.so');
    $readable = static function (string $path): bool {
        for ($p = $path; $p !== '/' && $p !== '.'; $p = dirname($p)) {
            if ((fileperms($p) & 0o005) !== 0o005 && !(is_file($p) && (fileperms($p) & 0o004))) {
                return false;
            }
        }
        return true;
    };
    $setpriv = trim((string) shell_exec('command -v setpriv'));
    if ($setpriv === '' || !$readable(PACKAGE . '/src') || !$readable((string) $library)) {
        echo "note: FFI::load() preloading as an unprivileged user not tried (setpriv missing or checkout not world-readable)\n";
        return;
    }
    checkProbe(probe(preloadArgs(null, false), [$setpriv, '--reuid=nobody', '--regid=nogroup', '--clear-groups']), 'FFI::load as nobody');
});

T::test('php -S under ffi.enable=preload: refused without preloading, served with it', function () use ($header, $isRoot): void {
    $env = ['SLOTPARTNER_TOKEN' => TOKEN, 'SLOTPARTNER_SOURCES' => '127.0.0.1'];
    $plain = new PhpServer(PACKAGE . '/examples/callback.php', $env, ['-d', 'ffi.enable=preload']);
    $answer = httpRequest($plain->port, 'POST', fixture('refund.json'), ['X-Service-Token' => TOKEN]);
    $log = implode("\n", $plain->scriptLog('configuration: '));
    $plain->stop();
    T::eq(500, $answer[0] ?? null, 'without preloading: 500');
    T::true(str_contains($log, 'restricted by "ffi.enable"'), 'without preloading: the log says why: ' . $log);

    $server = new PhpServer(PACKAGE . '/examples/callback.php', $env, preloadArgs($header, $isRoot, false));
    foreach (['refund', 'payout', 'balance'] as $kind) {
        $answer = httpRequest($server->port, 'POST', fixture($kind . '.json'), ['X-Service-Token' => TOKEN]);
        T::eq(200, $answer[0] ?? null, $kind . ': status');
        $expected = (string) file_get_contents(EXPECTED . '/cgi_' . $kind . '.out');
        $expectedBody = substr($expected, (int) strpos($expected, "\n\n") + 2, -strlen("exit: 0\n"));
        T::eq($expectedBody, $answer[2] ?? null, $kind . ': body as the CGI');
    }
    $invalid = httpRequest($server->port, 'POST', fixture('invalid_money_float.json'), ['X-Service-Token' => TOKEN]);
    T::eq('{"payout":{"success":false,"errorMessage":"jackpotPayout.moneyWon: expected a non-negative integer, got 1500.5"}}', $invalid[2] ?? null, 'invalid payout');
    $server->stop();
});

T::finish();
