<?php

declare(strict_types=1);

/*
 * steps.php: where a PHP-FPM worker's CPU goes in one request, for make bench-e2e with
 * E2E_STEPS=1 (included first by library.php and handwritten.php).
 *
 * When the request's E2E_STEPS parameter names a file, step('name') ends the step called name,
 * and the request appends one line to that file as it ends: "name=µs name=µs ...", the CPU time
 * (user and system, getrusage) of each step since the previous mark, the first since this file
 * was included, the last ('end') the rest of the request up to its shutdown. Without E2E_STEPS
 * step() does nothing. A mark costs a getrusage() call (about 1 µs), a request one locked append.
 */

final class Steps
{
    /** The file the request's line goes to; null when E2E_STEPS is not set. */
    public static ?string $file = null;

    /** @var list<array{string, int}> each mark's step name and the CPU time (µs) at the mark */
    public static array $marks = [];

    public static function cpu(): int
    {
        $usage = getrusage();
        return ($usage['ru_utime.tv_sec'] + $usage['ru_stime.tv_sec']) * 1000000
            + $usage['ru_utime.tv_usec'] + $usage['ru_stime.tv_usec'];
    }

    public static function write(): void
    {
        step('end');
        $line = [];
        for ($i = 1; $i < \count(self::$marks); $i++) {
            $line[] = self::$marks[$i][0] . '=' . (self::$marks[$i][1] - self::$marks[$i - 1][1]);
        }
        file_put_contents((string) self::$file, implode(' ', $line) . "\n", FILE_APPEND | LOCK_EX);
    }
}

function step(string $name): void
{
    if (Steps::$file !== null) {
        Steps::$marks[] = [$name, Steps::cpu()];
    }
}

$stepsFile = getenv('E2E_STEPS');
if (is_string($stepsFile) && $stepsFile !== '') {
    Steps::$file = $stepsFile;
    Steps::$marks = [['', Steps::cpu()]];
    register_shutdown_function([Steps::class, 'write']);
}
