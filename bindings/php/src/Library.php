<?php

declare(strict_types=1);

namespace SlotPartner;

use FFI;

/**
 * Finds and loads libslotpartner, once per process (per request without opcache.preload).
 *
 * Order: the FFI scope "SLOTPARTNER" when preloading declared it (opcache.preload of
 * preload.php, or ffi.preload of the header bin/slotpartner-preload-header writes); otherwise
 * FFI::cdef() of slotpartner_ffi.h with the library at $SLOTPARTNER_LIB (a file path), else the
 * checkout's target/release/libslotpartner.so, else "libslotpartner.so.0" (the SONAME an installed
 * library is loaded by) through the system loader (ld.so.conf, LD_LIBRARY_PATH).
 *
 * The loaded FFI object is never freed: the library stays mapped for the life of the process.
 */
final class Library
{
    /** The FFI scope name preload.php and the preload header declare. */
    public const SCOPE = 'SLOTPARTNER';

    /** Environment variable naming the shared library file. */
    public const ENV_LIBRARY = 'SLOTPARTNER_LIB';

    /** File name the system loader looks for when nothing else is found: the installed SONAME. */
    public const SONAME = 'libslotpartner.so.0';

    /** The library's file name in a checkout's target/release. */
    public const BUILT_NAME = 'libslotpartner.so';

    private static ?FFI $ffi = null;

    private static string $source = '';

    /**
     * The loaded library. Throws ConfigurationException when FFI is disabled or the library or
     * a symbol cannot be loaded.
     */
    public static function ffi(): FFI
    {
        return self::$ffi ??= self::load();
    }

    /** The version of the loaded library, such as "0.1.0" (sp_version). */
    public static function version(): string
    {
        return (string) self::ffi()->sp_version();
    }

    /** How the library was loaded: "scope" (preloaded), "cdef", or "" when not yet loaded. */
    public static function source(): string
    {
        return self::$source;
    }

    /** The path given to the dynamic loader: a file path, or the bare SONAME. */
    public static function libraryPath(): string
    {
        $fromEnv = getenv(self::ENV_LIBRARY);
        if (is_string($fromEnv) && $fromEnv !== '') {
            return $fromEnv;
        }
        $checkout = dirname(__DIR__, 3) . '/target/release/' . self::BUILT_NAME;
        if (is_file($checkout)) {
            return $checkout;
        }
        return self::SONAME;
    }

    /** The generated declarations file shipped with the package (no preprocessor lines). */
    public static function headerPath(): string
    {
        return dirname(__DIR__) . '/slotpartner_ffi.h';
    }

    /**
     * The declarations handed to FFI, read from slotpartner_ffi.h with one adaptation: byte
     * buffers declared `const uint8_t *` (bodies, PEM, JSON parameters) are declared
     * `const char *`, the same pointer for the ABI, so that PHP FFI passes a PHP string's bytes
     * without copying them (it refuses a string for `uint8_t *`).
     */
    public static function declarations(): string
    {
        $text = @file_get_contents(self::headerPath());
        if ($text === false) {
            throw new ConfigurationException('cannot read ' . self::headerPath(), Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'header');
        }
        return str_replace('const uint8_t *', 'const char *', $text);
    }

    /**
     * The text of a header for FFI::load() and ffi.preload: the scope and library defines
     * followed by the declarations.
     */
    public static function preloadHeader(?string $libraryPath = null): string
    {
        $library = $libraryPath ?? self::libraryPath();
        if (str_contains($library, '"') || str_contains($library, "\n")) {
            throw new ConfigurationException('library path must not contain quotes or newlines', Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'library');
        }
        return '#define FFI_SCOPE "' . self::SCOPE . "\"\n"
            . '#define FFI_LIB "' . $library . "\"\n"
            . self::declarations();
    }

    private static function load(): FFI
    {
        if (!extension_loaded('FFI')) {
            throw new ConfigurationException('the PHP FFI extension is not loaded (Debian: part of php8.2-common; php.ini: extension=ffi)', Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'library');
        }
        try {
            $ffi = FFI::scope(self::SCOPE);
            self::$source = 'scope';
            return $ffi;
        } catch (FFI\Exception) {
            // Not preloaded (or FFI restricted: cdef reports that below).
        }
        $library = self::libraryPath();
        try {
            $ffi = FFI::cdef(self::declarations(), $library);
        } catch (FFI\Exception $e) {
            $hint = !str_contains($e->getMessage(), 'ffi.enable')
                ? ' (build it with `make`, or set ' . self::ENV_LIBRARY . ' to its path)'
                : (ini_get('ffi.enable') === 'preload'
                    ? ' (ffi.enable=preload allows FFI only in the CLI and in preloaded code: set up opcache.preload with preload.php, see README.md, or set ffi.enable=1)'
                    : ' (FFI is disabled: ffi.enable=' . ini_get('ffi.enable') . ')');
            throw new ConfigurationException(
                'cannot load ' . $library . ': ' . $e->getMessage() . $hint,
                Status::INVALID_ARGUMENT,
                'SP_ERR_INVALID_ARGUMENT',
                'library',
                null,
                null,
                $e,
            );
        }
        self::$source = 'cdef';
        return $ffi;
    }
}
