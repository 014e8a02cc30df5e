<?php

declare(strict_types=1);

// What a new user gets wrong first, and the message that says so: a preload header naming a
// library that does not load, the library not found, a PHP too old, Library::source() asked
// before any call.

use SlotPartner\ConfigurationException;
use SlotPartner\Library;
use SlotPartner\PhpVersion;

require __DIR__ . '/helper.php';

const TOOL = PACKAGE . '/bin/slotpartner-preload-header';

/** The library's answer to a refused setting (src/callback/response.rs, MISCONFIGURED). */
const MISCONFIGURED = '{"error":{"code":"invalid_argument","field":"","message":"the partner is misconfigured; its log says how"}}';

/** A copy of the package outside the checkout (removed at exit): it finds no checkout build. */
function packageCopy(): string
{
    $dir = sys_get_temp_dir() . '/slotpartner-php-copy-' . getmypid() . '-' . bin2hex(random_bytes(4));
    exec('cp -R ' . escapeshellarg(PACKAGE) . ' ' . escapeshellarg($dir), $output, $rc);
    if ($rc !== 0) {
        throw new RuntimeException('cannot copy the package to ' . $dir);
    }
    atExit(static fn () => removeTree($dir));
    return $dir;
}

/** The environment without SLOTPARTNER_LIB, with LD_LIBRARY_PATH naming an empty folder. */
function bareEnvironment(string $emptyDir): array
{
    $env = getenv();
    unset($env['SLOTPARTNER_LIB']);
    $env['LD_LIBRARY_PATH'] = $emptyDir;
    return $env;
}

/** Runs PHP with exactly $env (runPhp adds to the current environment). */
function runPhpIn(array $args, array $env): array
{
    $process = proc_open(array_merge([PHP_BINARY], $args), [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, PACKAGE, $env);
    $out = (string) stream_get_contents($pipes[1]);
    $err = (string) stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    return [proc_close($process), $out, $err];
}

T::test('slotpartner-preload-header refuses a library that does not load, writing nothing', function (): void {
    $dir = tempDir();
    foreach (['/nonexistent/libslotpartner.so.0' => 'no such file', PACKAGE . '/composer.json' => 'Failed loading', 'libslotpartner-missing.so.0' => 'Failed loading'] as $lib => $why) {
        $header = $dir . '/slotpartner-preload.h';
        [$rc, $out, $err] = runPhp([TOOL, $header, '--lib', $lib]);
        T::eq(1, $rc, $lib . ': exit status 1');
        T::eq('', $out, $lib . ': nothing on standard output');
        T::true(!file_exists($header), $lib . ': no header written');
        T::true(str_starts_with($err, 'slotpartner-preload-header: cannot load ' . $lib . ': ' . $why), $lib . ': names the path and why: ' . $err);
        T::true(str_contains($err, 'no header written') && str_contains($err, '--lib PATH')
            && str_contains($err, 'pkg-config --variable=libdir slotpartner'), $lib . ': says what to do: ' . $err);
    }
    [$rc, $out, $err] = runPhp([TOOL, '-', '--lib', '/nonexistent/libslotpartner.so.0']);
    T::eq([1, ''], [$rc, $out], 'standard output: nothing written either');
    [$rc, , $err] = runPhp(['-d', 'ffi.enable=0', TOOL, '-', '--lib', ROOT . '/target/release/libslotpartner.so']);
    T::true($rc === 1 && str_contains($err, 'ffi.enable') && str_contains($err, 'php -d ffi.enable=1'), 'FFI disabled: says so: ' . $err);
    [$rc, $out] = runPhp([TOOL, '-', '--lib', ROOT . '/target/release/libslotpartner.so']);
    T::eq(0, $rc, 'a library that loads: exit status 0');
    T::true(str_starts_with($out, "#define FFI_SCOPE \"SLOTPARTNER\"\n#define FFI_LIB \"" . ROOT . '/target/release/libslotpartner.so"'), 'and its header');
});

T::test('the library not found: where it was looked for and what to do', function (): void {
    $copy = packageCopy();
    $empty = tempDir();
    $env = bareEnvironment($empty);
    [$rc] = runPhpIn(['-r', 'require "' . $copy . '/autoload.php"; SlotPartner\Library::ffi();'], $env);
    if ($rc === 0) {
        echo "skipped: the system loader finds an installed libslotpartner.so.0\n";
        return;
    }
    $script = 'require "' . $copy . '/autoload.php"; try { new SlotPartner\Receiver("x"); } catch (SlotPartner\ConfigurationException $e) { echo $e->field, ": ", $e->getMessage(); }';
    [, $out] = runPhpIn(['-r', $script], $env);
    $checkout = rtrim(dirname($copy, 2), '/') . '/target/release/libslotpartner.so';
    foreach ([
        "library: cannot load libslotpartner.so.0: Failed loading 'libslotpartner.so.0' (looked at: ",
        'the FFI scope SLOTPARTNER: not declared, no preloading; SLOTPARTNER_LIB: not set; ',
        $checkout . " (the checkout's `make`): no such file; ",
        'libslotpartner.so.0 through the system loader (LD_LIBRARY_PATH=' . $empty . ', then the ldconfig cache)). ',
        Library::LOAD_HELP,
    ] as $part) {
        T::true(str_contains($out, $part), 'names ' . $part . ' in: ' . $out);
    }
    foreach (['LD_LIBRARY_PATH', 'ldconfig', 'pkg-config --variable=libdir slotpartner', 'SLOTPARTNER_LIB', 'make'] as $word) {
        T::true(str_contains(Library::LOAD_HELP, $word), 'the help names ' . $word);
    }
    // The preload header's tool, without --lib, lists the same places.
    [$rc, , $err] = runPhpIn([$copy . '/bin/slotpartner-preload-header', '-'], $env);
    T::true($rc === 1 && str_contains($err, 'Looked at: SLOTPARTNER_LIB: not set; ' . $checkout), 'the tool lists them: ' . $err);
});

T::test('an older PHP is told which version is needed', function (): void {
    $composer = json_decode((string) file_get_contents(PACKAGE . '/composer.json'), true);
    T::eq('>=' . PhpVersion::REQUIRED, $composer['require']['php'] ?? null, 'PhpVersion::REQUIRED is composer.json\'s require.php');
    PhpVersion::check(PHP_VERSION);
    PhpVersion::check(PhpVersion::REQUIRED . '.0');
    foreach (['8.1.27', '7.4.33', '5.6.40'] as $old) {
        $e = T::throws(RuntimeException::class, fn () => PhpVersion::check($old), 'PHP ' . $old);
        T::eq('slotpartner needs PHP ' . PhpVersion::REQUIRED . ' or newer (composer.json: "php": ">=' . PhpVersion::REQUIRED
            . '"); this is PHP ' . $old . ' (' . PHP_BINARY . ')', $e?->getMessage(), 'PHP ' . $old . ': the message');
    }
    // autoload.php calls it with PHP_VERSION, before any other class loads: a copy of the package
    // whose requirement is above the running PHP refuses this PHP in the same words.
    $copy = packageCopy();
    $file = $copy . '/src/PhpVersion.php';
    file_put_contents($file, str_replace("const REQUIRED = '" . PhpVersion::REQUIRED . "';", "const REQUIRED = '99.0';", (string) file_get_contents($file)));
    [$rc, $out, $err] = runPhp(['-d', 'display_errors=stderr', '-r', 'require "' . $copy . '/autoload.php"; echo "loaded";']);
    T::eq(255, $rc, 'autoload.php stops the script');
    T::true(!str_contains($out, 'loaded'), 'nothing after it runs');
    T::true(str_contains($err, 'Uncaught RuntimeException: slotpartner needs PHP 99.0 or newer (composer.json: "php": ">=99.0"); this is PHP ' . PHP_VERSION), 'autoload.php names the versions: ' . $err);
    [$rc, $out] = runPhp(['-r', 'require "' . PACKAGE . '/autoload.php"; echo "loaded";']);
    T::eq([0, 'loaded'], [$rc, $out], 'the package as it is loads on this PHP');
});

T::test('Library::source() before any call loads the library as that call would', function (): void {
    [$rc, $out, $err] = runPhp(['-r', 'require "' . PACKAGE . '/autoload.php"; echo SlotPartner\Library::source();']);
    T::eq([0, 'cdef'], [$rc, $out], 'cdef, first thing in a process: ' . $err);
    $script = 'require "' . PACKAGE . '/autoload.php"; try { SlotPartner\Library::source(); } catch (SlotPartner\ConfigurationException $e) { echo $e->getMessage(); }';
    [, $out] = runPhp(['-r', $script], ['SLOTPARTNER_LIB' => '/nonexistent/libslotpartner.so']);
    T::true(str_starts_with($out, 'cannot load /nonexistent/libslotpartner.so'), 'a library that cannot load: the first call\'s exception: ' . $out);
    T::true(str_contains($out, '(looked at: the FFI scope SLOTPARTNER: not declared, no preloading; SLOTPARTNER_LIB=/nonexistent/libslotpartner.so '
        . '(nothing else is tried while it is set): no such file). ' . Library::LOAD_HELP), 'SLOTPARTNER_LIB named, with the help: ' . $out);
});

T::test('an Endpoint without FFI or without the library: 500 with the misconfigured body, the log line says why', function (): void {
    $script = 'require "' . PACKAGE . '/autoload.php";'
        . '$e = SlotPartner\Endpoint::fromEnvironment();'
        . '$r = $e->handle("POST", null, "127.0.0.1", null, "{}", fn ($event) => null);'
        . 'echo json_encode([$r->status, $r->body, $r->log, $e->configurationError()?->field]), "\n";'
        . '$_SERVER["REQUEST_METHOD"] = "POST"; $e->serve(fn ($event) => null);';
    $env = ['SLOTPARTNER_TOKEN' => TOKEN];
    $cases = [
        'no FFI extension' => [['-n'], $env, 'configuration: library: the PHP FFI extension is not loaded'],
        'ffi.enable=0' => [['-d', 'ffi.enable=0'], $env, 'configuration: library: cannot load '],
        'no library' => [['-d', 'ffi.enable=1'], $env + ['SLOTPARTNER_LIB' => '/nonexistent/libslotpartner.so'], 'configuration: library: cannot load /nonexistent/libslotpartner.so: '],
    ];
    $why = ['no FFI extension' => 'extension=ffi', 'ffi.enable=0' => '(FFI is disabled: ffi.enable=0)', 'no library' => '(looked at: '];
    foreach ($cases as $case => [$options, $variables, $start]) {
        [$rc, $out, $err] = runPhp(array_merge($options, ['-d', 'display_errors=0', '-d', 'log_errors=1', '-d', 'error_log=', '-r', $script]), $variables);
        [$line, $served] = explode("\n", $out, 2) + ['', ''];
        [$status, $body, $log, $field] = json_decode($line, true) ?? [null, null, '', null];
        T::eq([0, 500, MISCONFIGURED, 'library'], [$rc, $status, $body, $field], $case . ': 500, the library\'s misconfigured body: ' . $out . $err);
        T::true(str_starts_with((string) $log, $start) && str_contains((string) $log, $why[$case]), $case . ': the log line names the cause: ' . $log);
        T::eq(MISCONFIGURED, $served, $case . ': serve() sends the same body');
        T::true(str_contains($err, (string) $log), $case . ': serve() logs the line: ' . $err);
        T::true(!str_contains($out . $err, 'no error recorded'), $case . ': no "no error recorded"');
    }
});

T::test('null where a string goes to the library', function (): void {
    $e = T::throws(ConfigurationException::class, fn () => new SlotPartner\Receiver(null), 'tokens null');
    T::eq(['token', 'token: must be a string, not null', 500], [$e?->field, $e?->getMessage(), $e?->httpStatus], 'named, with HTTP 500');
    $e = T::throws(ConfigurationException::class, fn () => new SlotPartner\Receiver([TOKEN, null]), 'a null in the list');
    T::eq('token: item 2 of the list is null, not a string', $e?->getMessage(), 'named');
    // Elsewhere PHP's own types refuse null for a required string before the binding runs.
    T::throws(TypeError::class, fn () => new SlotPartner\Client('https://127.0.0.1:1', null), 'Client token null: a TypeError');
});

T::finish();
