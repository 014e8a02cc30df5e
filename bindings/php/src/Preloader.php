<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI;

/**
 * Preloading (opcache.preload=.../preload.php): declares the FFI scope "SLOTPARTNER" once per
 * server and preloads every class of the binding, so that requests skip parsing the
 * declarations (FFI::cdef) and so that the binding works under ffi.enable=preload, the default,
 * which allows FFI only in the CLI and in preloaded code.
 *
 * The scope comes from ffi.preload when that names the header bin/slotpartner-preload-header
 * writes (required when PHP starts as root: opcache.preload_user then preloads in a forked
 * child where FFI::load() refuses to work), else from FFI::load() of the same header written to
 * a private temporary file, deleted right after.
 */
final class Preloader
{
    private function __construct()
    {
    }

    /** Runs the preloading; throws (failing the server start) when the scope cannot be declared. */
    public static function run(): void
    {
        if (!self::scopeDeclared()) {
            self::declareScope();
        }
        foreach (glob(__DIR__ . '/*.php') ?: [] as $file) {
            $class = __NAMESPACE__ . '\\' . basename($file, '.php');
            if (!class_exists($class) && !enum_exists($class)) {
                throw new \LogicException('preload: ' . $file . ' does not declare ' . $class);
            }
        }
    }

    private static function scopeDeclared(): bool
    {
        try {
            FFI::scope(Library::SCOPE);
            return true;
        } catch (FFI\Exception) {
            return false;
        }
    }

    private static function declareScope(): void
    {
        $file = tempnam(sys_get_temp_dir(), 'slotpartner-ffi-');
        if ($file === false) {
            throw new \RuntimeException('preload: cannot create a temporary file in ' . sys_get_temp_dir());
        }
        try {
            file_put_contents($file, Library::preloadHeader(self::absoluteLibraryPath()));
            FFI::load($file);
        } catch (FFI\Exception $e) {
            throw new \RuntimeException(
                'preload: FFI::load() failed (' . $e->getMessage() . '). When PHP starts as root with '
                . 'opcache.preload_user, write the header with bin/slotpartner-preload-header and name it '
                . 'in ffi.preload (see README.md)',
                0,
                $e,
            );
        } finally {
            @unlink($file);
        }
    }

    /** Library::libraryPath(), made absolute when it names an existing file. */
    public static function absoluteLibraryPath(): string
    {
        $path = Library::libraryPath();
        $real = is_file($path) ? realpath($path) : false;
        return $real === false ? $path : $real;
    }
}
