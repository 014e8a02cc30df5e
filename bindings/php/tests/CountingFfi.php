<?php

declare(strict_types=1);

/**
 * Wraps the loaded FFI object and counts the calls that cross into libslotpartner (the sp_
 * functions); FFI's own helpers (new, cast, type) are forwarded without counting. Installed
 * with SlotPartner\Native::useFfi() by the tests and the benchmark.
 */
final class CountingFfi
{
    /** @var array<string, int> calls per function since the last reset() */
    public array $calls = [];

    public function __construct(private readonly FFI $ffi)
    {
    }

    /** @param list<mixed> $args */
    public function __call(string $name, array $args): mixed
    {
        if (str_starts_with($name, 'sp_')) {
            $this->calls[$name] = ($this->calls[$name] ?? 0) + 1;
        }
        return $this->ffi->$name(...$args);
    }

    public function total(): int
    {
        return array_sum($this->calls);
    }

    public function reset(): void
    {
        $this->calls = [];
    }
}
