<?php

declare(strict_types=1);

// Amounts are never coerced (a caller without strict_types passing 1299.99 or "1299.99" is
// refused, not truncated to 1299), and slotpartner-preload-header refuses an older library that
// lacks a declared function and writes the file LD_LIBRARY_PATH found rather than a bare name.

use SlotPartner\BalanceQuery;
use SlotPartner\ConfigurationException;
use SlotPartner\Receiver;

require __DIR__ . '/helper.php';
require __DIR__ . '/loose_caller.php';

const TOOL = PACKAGE . '/bin/slotpartner-preload-header';

T::test('amounts from a caller without strict_types: only an int, never truncated', function (): void {
    $event = (new Receiver(TOKEN, sources: 'any'))->handle(TOKEN, '127.0.0.1', fixture('balance.json'));
    T::true($event instanceof BalanceQuery, 'a BalanceQuery');
    foreach ([1299.99, '1299.99', '1299', 1299.0, true, null] as $value) {
        $what = var_export($value, true);
        foreach (['Reply::balance' => fn () => looseBalance($value), 'replyBalance' => fn () => looseReplyBalance($event, $value)] as $name => $call) {
            $e = T::throws(ConfigurationException::class, $call, $name . ' money ' . $what);
            T::eq('money', $e?->field, $name . ' ' . $what . ': names money');
            T::eq('money: must be an int, not ' . get_debug_type($value), $e?->getMessage(), $name . ' ' . $what . ': the message');
            T::eq(500, $e?->httpStatus, $name . ' ' . $what . ': HTTP 500');
            T::eq('invalid_argument', json_decode((string) $e?->responseBody, true)['error']['code'] ?? null, $name . ' ' . $what . ': the body');
        }
        $e = T::throws(ConfigurationException::class, fn () => looseBalance(1, $value), 'coins ' . $what);
        T::eq('coins', $e?->field, 'coins ' . $what . ': names coins');
    }
    T::eq('{"playerBalance":{"money":1299,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}', looseBalance(1299), 'an int still works');
    T::eq('{"playerBalance":{"money":1299,"currencyISO4217":"EUR","coins":0,"errorMessage":""}}', looseReplyBalance($event, 1299), 'on the event too');
});

T::test('slotpartner-preload-header refuses an older library lacking a declared function', function (): void {
    $dir = tempDir();
    file_put_contents($dir . '/v.c', "const char *sp_version(void) { return \"0.0.1\"; }\n");
    exec('cc -shared -fPIC -o ' . escapeshellarg($dir . '/libold.so') . ' ' . escapeshellarg($dir . '/v.c') . ' 2>&1', $output, $rc);
    if ($rc !== 0) {
        echo "skipped: no C compiler (cc): " . implode("\n", $output) . "\n";
        return;
    }
    $header = $dir . '/slotpartner-preload.h';
    [$rc, $out, $err] = runPhp([TOOL, '--lib', $dir . '/libold.so', $header]);
    T::eq(1, $rc, 'exit status 1: ' . $err);
    T::eq('', $out, 'nothing on standard output');
    T::true(!file_exists($header), 'no header written');
    T::true(str_starts_with($err, 'slotpartner-preload-header: cannot load ' . $dir . '/libold.so: it lacks sp_'), 'names the path and the missing function: ' . $err);
    T::true(str_contains($err, 'version 0.0.1') && str_contains($err, 'no header written'), 'names the version found: ' . $err);
    [$rc] = runPhp([TOOL, '--lib', ROOT . '/target/release/libslotpartner.so', $header]);
    T::eq(0, $rc, 'the checkout\'s library passes');
});

T::test('slotpartner-preload-header writes the file LD_LIBRARY_PATH found, not a bare name', function (): void {
    $dir = tempDir();
    $libDir = $dir . '/lib';
    mkdir($libDir);
    symlink(ROOT . '/target/release/libslotpartner.so', $libDir . '/libslotpartner.so.0');
    $env = ['SLOTPARTNER_LIB' => 'libslotpartner.so.0', 'LD_LIBRARY_PATH' => $dir . '/nothing-here:' . $libDir];
    [$rc, $out, $err] = runPhp([TOOL, '-'], $env);
    T::eq(0, $rc, 'exit status 0: ' . $err);
    T::true(str_starts_with($out, "#define FFI_SCOPE \"SLOTPARTNER\"\n#define FFI_LIB \"" . $libDir . "/libslotpartner.so.0\"\n"), 'names the file found, link kept: ' . strtok($out, "\n"));
    [$rc, $out, $err] = runPhp([TOOL, '--lib', 'libslotpartner.so.0', '-'], $env);
    T::true($rc === 0 && str_contains($out, '#define FFI_LIB "' . $libDir . '/libslotpartner.so.0"'), 'with --lib NAME as well: ' . $err);
    // A relative LD_LIBRARY_PATH folder is made absolute.
    [$rc, $out, $err] = runPhp([TOOL, '-'], ['SLOTPARTNER_LIB' => 'libslotpartner.so.0', 'LD_LIBRARY_PATH' => 'lib'], null, ['env', '-C', $dir]);
    T::true($rc === 0 && str_contains($out, '#define FFI_LIB "' . $libDir . '/libslotpartner.so.0"'), 'a relative folder: ' . $err . strtok($out, "\n"));
    T::eq($libDir . '/libslotpartner.so.0', SlotPartner\Library::findInLoaderPath('libslotpartner.so.0', '/nonexistent:' . $libDir), 'findInLoaderPath');
    T::eq(null, SlotPartner\Library::findInLoaderPath('libslotpartner.so.0', ''), 'no LD_LIBRARY_PATH: the bare name stays');
    T::eq(null, SlotPartner\Library::findInLoaderPath($libDir . '/libslotpartner.so.0', $libDir), 'a path is kept as it is');
});

T::finish();
