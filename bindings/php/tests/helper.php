<?php

declare(strict_types=1);

/*
 * The tests' tiny harness: T::test() runs a named block, T::eq()/T::true()/T::throws() count one
 * assertion each, T::finish() prints "N passed, N failed" (run_tests.sh adds them up) and exits
 * non-zero on a failure. Plus the paths of the checkout and helpers to run processes.
 */

require dirname(__DIR__) . '/autoload.php';
require __DIR__ . '/CountingFfi.php';

const TOKEN = '6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f';
const OTHER_TOKEN = '0b7e3c55-1a2b-4c3d-8e9f-000000000001';

define('PACKAGE', dirname(__DIR__));
define('ROOT', dirname(__DIR__, 3));
define('FIXTURES', ROOT . '/tests/fixtures');
define('EXPECTED', ROOT . '/tests/c/expected');
define('SANDBOX', ROOT . '/target/release/slotpartner-sandbox');

final class T
{
    public static int $passed = 0;
    public static int $failed = 0;
    private static string $current = '';

    public static function test(string $name, callable $body): void
    {
        self::$current = $name;
        try {
            $body();
        } catch (Throwable $e) {
            self::fail('unexpected ' . get_class($e) . ': ' . $e->getMessage() . ' at ' . basename($e->getFile()) . ':' . $e->getLine());
        }
        self::$current = '';
    }

    public static function eq(mixed $expected, mixed $actual, string $what): void
    {
        if ($expected === $actual) {
            self::$passed++;
        } else {
            self::fail($what . ': expected ' . self::show($expected) . ', got ' . self::show($actual));
        }
    }

    public static function true(bool $condition, string $what): void
    {
        if ($condition) {
            self::$passed++;
        } else {
            self::fail($what);
        }
    }

    /**
     * Runs $body and expects it to throw $class; returns the exception (null when it did not).
     *
     * @template E of Throwable
     * @param class-string<E> $class
     * @return E|null
     */
    public static function throws(string $class, callable $body, string $what): ?Throwable
    {
        try {
            $body();
        } catch (Throwable $e) {
            if ($e instanceof $class) {
                self::$passed++;
                return $e;
            }
            self::fail($what . ': expected ' . $class . ', got ' . get_class($e) . ': ' . $e->getMessage());
            return null;
        }
        self::fail($what . ': expected ' . $class . ', nothing was thrown');
        return null;
    }

    public static function fail(string $message): void
    {
        self::$failed++;
        echo 'FAIL ', self::$current === '' ? '' : '[' . self::$current . '] ', $message, "\n";
    }

    public static function finish(): never
    {
        echo self::$passed, ' passed, ', self::$failed, " failed\n";
        exit(self::$failed === 0 && self::$passed > 0 ? 0 : 1);
    }

    private static function show(mixed $value): string
    {
        return is_string($value) ? json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE) : var_export($value, true);
    }
}

function fixture(string $name): string
{
    $text = file_get_contents(FIXTURES . '/' . $name);
    if ($text === false) {
        throw new RuntimeException('missing fixture ' . $name);
    }
    return $text;
}

/**
 * Runs $cleanup when this test file's process ends (exit, an uncaught exception, a fatal error,
 * SIGINT, SIGTERM or SIGHUP), after the cleanups registered later (last in, first out: a server
 * stops before its directory is removed). A child made with pcntl_fork inherits the list and
 * runs none of it.
 */
function atExit(callable $cleanup): void
{
    static $cleanups = null;
    if ($cleanups === null) {
        $cleanups = new ArrayObject();
        $owner = getmypid();
        // A signal's default action would end the process without its shutdown functions.
        pcntl_async_signals(true);
        foreach ([SIGINT => 130, SIGTERM => 143, SIGHUP => 129] as $signal => $status) {
            pcntl_signal($signal, static function () use ($status): void {
                exit($status);
            });
        }
        register_shutdown_function(static function () use ($cleanups, $owner): void {
            if (getmypid() !== $owner) {
                return;
            }
            foreach (array_reverse($cleanups->getArrayCopy()) as $run) {
                try {
                    $run();
                } catch (Throwable $e) {
                    T::fail('cleanup: ' . $e->getMessage());
                }
            }
        });
    }
    $cleanups[] = $cleanup;
}

/** A new directory under the system's temporary directory, removed with all it holds at exit. */
function tempDir(): string
{
    $dir = sys_get_temp_dir() . '/slotpartner-php-' . getmypid() . '-' . bin2hex(random_bytes(4));
    mkdir($dir, 0700);
    atExit(static fn () => removeTree($dir));
    return $dir;
}

/** Removes $path and everything under it; a symbolic link is removed, never followed. */
function removeTree(string $path): void
{
    if (is_link($path) || is_file($path)) {
        @unlink($path);
        return;
    }
    if (!is_dir($path)) {
        return;
    }
    foreach (scandir($path) ?: [] as $entry) {
        if ($entry !== '.' && $entry !== '..') {
            removeTree($path . '/' . $entry);
        }
    }
    @rmdir($path);
}

/**
 * The live (not zombie) processes of process group $pgid, read from /proc.
 *
 * @return list<int>
 */
function processGroupMembers(int $pgid): array
{
    $members = [];
    foreach (glob('/proc/[0-9]*/stat') ?: [] as $file) {
        $stat = @file_get_contents($file);
        if ($stat === false) {
            continue; // ended meanwhile
        }
        // After "pid (comm) ": state, ppid, pgrp; comm may hold spaces and parentheses.
        $fields = explode(' ', substr($stat, strrpos($stat, ')') + 2));
        if ((int) ($fields[2] ?? 0) === $pgid && ($fields[0] ?? 'Z') !== 'Z') {
            $members[] = (int) basename(dirname($file));
        }
    }
    return $members;
}

function waitFor(callable $ready, float $seconds, string $what): void
{
    $deadline = microtime(true) + $seconds;
    while (!$ready()) {
        if (microtime(true) > $deadline) {
            throw new RuntimeException('timed out waiting for ' . $what);
        }
        usleep(50_000);
    }
}

/** A free loopback port (bound then released: the tests start the server right after). */
function freePort(): int
{
    // Each call a port no earlier call of this process gave: the kernel may hand a released port
    // out again, and two servers of one test given the same port answer for each other.
    static $given = [];
    do {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        if ($server === false) {
            throw new RuntimeException('cannot bind: ' . $error);
        }
        $name = (string) stream_socket_get_name($server, false);
        fclose($server);
        $port = (int) substr($name, strrpos($name, ':') + 1);
    } while (isset($given[$port]));
    $given[$port] = true;
    return $port;
}

/**
 * `slotpartner-sandbox serve` on 127.0.0.1:0; stopped by closing its standard input, by stop()
 * or at exit. With $eventsCount it also serves getEvent for the events `send --burst N --seed
 * $eventsSeed` sends (indexes 1 to $eventsCount).
 */
final class Sandbox
{
    /** @var resource|null the process until stop() */
    private $process;
    /** @var resource */
    private $stdin;
    private ?int $status = null;
    public readonly string $url;
    public readonly string $caFile;

    public function __construct(?int $eventsCount = null, int $eventsSeed = 1)
    {
        if (!is_executable(SANDBOX)) {
            throw new RuntimeException(SANDBOX . ' is missing: cargo build --release -p slotpartner-sandbox');
        }
        $dir = tempDir();
        $this->caFile = $dir . '/ca.pem';
        $ready = $dir . '/ready';
        $process = proc_open(
            array_merge(
                [SANDBOX, 'serve', '--listen', '127.0.0.1:0', '--token', TOKEN, '--ca-out', $this->caFile, '--ready-file', $ready, '--exit-on-stdin-eof'],
                $eventsCount === null ? [] : ['--events-count', (string) $eventsCount, '--events-seed', (string) $eventsSeed],
            ),
            [0 => ['pipe', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']],
            $pipes,
        );
        if ($process === false) {
            throw new RuntimeException('cannot start the sandbox');
        }
        $this->process = $process;
        $this->stdin = $pipes[0];
        atExit(fn () => $this->stop());
        waitFor(static fn (): bool => is_file($ready) && filesize($ready) > 0, 20, 'the sandbox ready file');
        $this->url = (string) file_get_contents($ready);
    }

    /**
     * Closes the sandbox's standard input (it exits) and waits for it, killing it after 20 s;
     * returns its exit status. Once stopped, returns the same status again.
     */
    public function stop(): int
    {
        if ($this->process === null) {
            return (int) $this->status;
        }
        fclose($this->stdin);
        $deadline = microtime(true) + 20;
        while (($state = proc_get_status($this->process))['running'] && microtime(true) < $deadline) {
            usleep(20_000);
        }
        if ($state['running']) {
            proc_terminate($this->process, SIGKILL);
            $state = ['exitcode' => -1];
        }
        proc_close($this->process);
        $this->process = null;
        return $this->status = $state['exitcode'];
    }
}

/**
 * `php -S 127.0.0.1:PORT SCRIPT` with extra ini settings and environment; stderr kept in a file.
 * It runs in a process group of its own (setsid), with the workers it forks under
 * PHP_CLI_SERVER_WORKERS: stop(), or the end of the test file whatever ends it, stops the whole
 * group and waits until none of it is left.
 */
final class PhpServer
{
    /** @var resource|null the process until stop() */
    private $process;
    /** The server's pid, which is also its process group's id. */
    private int $group;
    public readonly int $port;
    public readonly string $url;
    public readonly string $logFile;

    /**
     * @param array<string, string> $env added to the current environment
     * @param list<string> $phpArgs such as ['-d', 'ffi.enable=1']
     * @param list<string> $unsetEnv variables removed from the environment
     */
    public function __construct(string $script, array $env, array $phpArgs = [], array $unsetEnv = [])
    {
        $this->port = freePort();
        $this->url = 'http://127.0.0.1:' . $this->port . '/';
        $this->logFile = tempDir() . '/server.log';
        $environment = getenv();
        foreach ($unsetEnv as $name) {
            unset($environment[$name]);
        }
        // setsid execs php in place (proc_open's child leads no group), making the server's pid
        // its process group's id, which its workers inherit.
        $command = array_merge(['setsid', PHP_BINARY], $phpArgs, ['-S', '127.0.0.1:' . $this->port, $script]);
        $process = proc_open(
            $command,
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['file', $this->logFile, 'w']],
            $pipes,
            PACKAGE,
            array_merge($environment, $env),
        );
        if ($process === false) {
            throw new RuntimeException('cannot start php -S');
        }
        $this->process = $process;
        $this->group = proc_get_status($process)['pid'];
        atExit(fn () => $this->stop());
        waitFor(function (): bool {
            $socket = @stream_socket_client('tcp://127.0.0.1:' . $this->port, $errno, $error, 0.2);
            if ($socket === false) {
                if (!proc_get_status($this->process)['running']) {
                    throw new RuntimeException('php -S exited: ' . file_get_contents($this->logFile));
                }
                return false;
            }
            fclose($socket);
            return true;
        }, 20, 'php -S on port ' . $this->port);
        if (posix_getpgid($this->group) !== $this->group) {
            throw new RuntimeException('php -S (pid ' . $this->group . ') is not in a process group of its own: setsid did not run it in place');
        }
    }

    /**
     * The lines the script wrote with the given prefix (the server's own log lines left out),
     * without what php -S puts before a line written with error_log(): the time, and under
     * PHP_CLI_SERVER_WORKERS the worker's pid before it.
     */
    public function scriptLog(string $prefix = 'callback.php: '): array
    {
        $lines = preg_replace('/^(\[[0-9]+\] )?\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} [0-9]{4}\] /', '', file($this->logFile, FILE_IGNORE_NEW_LINES) ?: []);
        return array_values(array_filter($lines, static fn (string $line): bool => str_starts_with($line, $prefix)));
    }

    /**
     * Stops the server and its workers: SIGINT to the group ends each one's loop, and the server
     * waits for its workers before it exits (SIGTERM would end the server alone and leave its
     * workers serving). What is left after 10 s is killed. Returns once no process of the group
     * is left; throws naming them when some outlive SIGKILL for 10 s. Does nothing once stopped.
     */
    public function stop(): void
    {
        if ($this->process === null) {
            return;
        }
        $process = $this->process;
        $this->process = null;
        posix_kill(-$this->group, SIGINT);
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
                throw new RuntimeException('php -S on port ' . $this->port . ': processes ' . implode(', ', $left) . ' of its group outlived SIGKILL');
            }
            usleep(20_000);
        }
    }
}

/**
 * One raw HTTP/1.1 request to 127.0.0.1:$port (for $path; the sending side shut once sent
 * unless !$halfClose: nginx takes that for a client gone and answers nothing); returns [status, headers (lower-case name =>
 * value), body], or null when the server closed the connection without answering.
 *
 * @return array{0: int, 1: array<string, string>, 2: string}|null
 */
function httpRequest(int $port, string $method, string $body, array $headers = [], ?string $contentLength = null, string $path = '/', bool $halfClose = true): ?array
{
    $socket = stream_socket_client('tcp://127.0.0.1:' . $port, $errno, $error, 5);
    if ($socket === false) {
        throw new RuntimeException('cannot connect: ' . $error);
    }
    $request = $method . ' ' . $path . " HTTP/1.1\r\nHost: 127.0.0.1:" . $port . "\r\nConnection: close\r\n";
    foreach ($headers as $name => $value) {
        $request .= $name . ': ' . $value . "\r\n";
    }
    if ($method === 'POST') {
        $request .= 'Content-Type: application/json; charset=utf-8' . "\r\n";
        $request .= 'Content-Length: ' . ($contentLength ?? (string) strlen($body)) . "\r\n";
    }
    fwrite($socket, $request . "\r\n" . $body);
    if ($halfClose) {
        stream_socket_shutdown($socket, STREAM_SHUT_WR);
    }
    stream_set_timeout($socket, 10);
    $answer = stream_get_contents($socket);
    fclose($socket);
    if ($answer === false || $answer === '') {
        return null;
    }
    [$head, $content] = explode("\r\n\r\n", $answer, 2) + [1 => ''];
    $lines = explode("\r\n", $head);
    if (preg_match('#^HTTP/1\.[01] (\d{3})#', $lines[0], $m) !== 1) {
        throw new RuntimeException('not an HTTP answer: ' . $lines[0]);
    }
    $fields = [];
    foreach (array_slice($lines, 1) as $line) {
        [$name, $value] = explode(':', $line, 2) + [1 => ''];
        $fields[strtolower(trim($name))] = trim($value);
    }
    if (strtolower($fields['transfer-encoding'] ?? '') === 'chunked') {
        $content = dechunk($content);
    }
    return [(int) $m[1], $fields, $content];
}

/** The body of a chunked HTTP/1.1 answer (nginx sends one when it does not know the length). */
function dechunk(string $chunked): string
{
    $body = '';
    $at = 0;
    while (($end = strpos($chunked, "\r\n", $at)) !== false) {
        $size = hexdec(trim(explode(';', substr($chunked, $at, $end - $at))[0]));
        if ($size === 0) {
            break;
        }
        $body .= substr($chunked, $end + 2, (int) $size);
        $at = $end + 2 + (int) $size + 2;
    }
    return $body;
}

/**
 * Runs a PHP script in a child process; returns [exit status, stdout, stderr].
 *
 * @param list<string> $args PHP options, the script and its arguments
 * @return array{0: int, 1: string, 2: string}
 */
function runPhp(array $args, array $env = [], ?string $input = null, ?array $prefix = null): array
{
    $process = proc_open(
        array_merge($prefix ?? [], [PHP_BINARY], $args),
        [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']],
        $pipes,
        PACKAGE,
        array_merge(getenv(), $env),
    );
    if ($process === false) {
        throw new RuntimeException('cannot run php');
    }
    fwrite($pipes[0], $input ?? '');
    fclose($pipes[0]);
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    return [proc_close($process), (string) $out, (string) $err];
}
