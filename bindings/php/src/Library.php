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
 * When none loads, the ConfigurationException lists every place looked at (searched()) and what
 * to do (LOAD_HELP). The loaded FFI object is never freed: the library stays mapped for the life
 * of the process.
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

    /** What to do when the library is not found. */
    public const LOAD_HELP = 'Build it with `make` in the checkout, or install it with `make install PREFIX=/usr/local` '
        . 'and run `ldconfig`; for a library in a directory the loader does not search, add that directory to '
        . 'LD_LIBRARY_PATH of the process that starts PHP (for an installed library, `pkg-config --variable=libdir '
        . 'slotpartner` prints it), or set SLOTPARTNER_LIB to the library file.';

    private const NO_FFI = 'the PHP FFI extension is not loaded (Debian: part of php8.2-common; php.ini: extension=ffi)';

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

    /**
     * How the library was loaded: "scope" (the FFI scope preloading declared) or "cdef"
     * (FFI::cdef() of libraryPath()). Before the first call that needs the library, it loads it
     * as that call would, so the answer is never a guess; it throws the ConfigurationException
     * that call would throw when the library cannot be loaded.
     */
    public static function source(): string
    {
        self::ffi();
        return self::$source;
    }

    /** The path given to the dynamic loader: a file path, or the bare SONAME. */
    public static function libraryPath(): string
    {
        $fromEnv = getenv(self::ENV_LIBRARY);
        if (is_string($fromEnv) && $fromEnv !== '') {
            return $fromEnv;
        }
        $checkout = self::checkoutPath();
        if (is_file($checkout)) {
            return $checkout;
        }
        return self::SONAME;
    }

    /**
     * Every place libraryPath() looks at, in order, each with what was found there: for the
     * message when the library cannot be loaded.
     *
     * @return list<string>
     */
    public static function searched(): array
    {
        $fromEnv = getenv(self::ENV_LIBRARY);
        if (is_string($fromEnv) && $fromEnv !== '') {
            return [self::ENV_LIBRARY . '=' . $fromEnv . ' (nothing else is tried while it is set)'
                . (str_contains($fromEnv, '/') && !file_exists($fromEnv) ? ': no such file' : '')];
        }
        $checkout = self::checkoutPath();
        $loaderPath = getenv('LD_LIBRARY_PATH');
        return [
            self::ENV_LIBRARY . ': not set',
            $checkout . ' (the checkout\'s `make`)' . (is_file($checkout) ? '' : ': no such file'),
            self::SONAME . ' through the system loader (LD_LIBRARY_PATH='
                . (is_string($loaderPath) && $loaderPath !== '' ? $loaderPath : '(unset)') . ', then the ldconfig cache)',
        ];
    }

    /**
     * Checks that $library exists and loads, and that it provides every function the binding
     * declares (FFI::cdef of the same declarations the preload header holds, which resolves each
     * of them), before anything names it (the preload header): an older library lacking a newer
     * function would otherwise stop the server's start with PHP's "cannot resolve C function".
     * Throws ConfigurationException naming the path and why it does not load, or the first
     * missing function PHP names.
     */
    public static function probe(string $library): void
    {
        if (!extension_loaded('FFI')) {
            throw new ConfigurationException(self::NO_FFI, Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'library');
        }
        if (str_contains($library, '/') && !file_exists($library)) {
            throw new ConfigurationException('cannot load ' . $library . ': no such file', Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'library');
        }
        try {
            $version = (string) FFI::cdef('const char *sp_version(void);', $library)->sp_version();
        } catch (FFI\Exception $e) {
            throw new ConfigurationException('cannot load ' . $library . ': ' . $e->getMessage(), Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'library', null, null, $e);
        }
        $declarations = self::declarations();
        try {
            FFI::cdef($declarations, $library);
        } catch (FFI\Exception $e) {
            $missing = preg_match("~C function '([A-Za-z0-9_]+)'~", $e->getMessage(), $m) === 1 ? $m[1] : null;
            throw new ConfigurationException(
                'cannot load ' . $library . ': '
                    . ($missing !== null ? 'it lacks ' . $missing . ', which this binding declares' : 'it does not provide every function this binding declares')
                    . ' (' . $e->getMessage() . '); the library is version ' . $version
                    . ', older than this binding: install the library of the same release as the binding',
                Status::INVALID_ARGUMENT,
                'SP_ERR_INVALID_ARGUMENT',
                'library',
                null,
                null,
                $e,
            );
        }
    }

    /**
     * The file the dynamic loader finds for the bare library name $name through LD_LIBRARY_PATH
     * ($searchPath, the current process's when null), as an absolute path with links kept; null
     * when $name is a path, LD_LIBRARY_PATH is unset or empty, or none of its folders holds it
     * (the ldconfig cache, which every process sees, then finds it). An empty entry is the
     * current folder, as for the loader.
     */
    public static function findInLoaderPath(string $name, ?string $searchPath = null): ?string
    {
        if (str_contains($name, '/')) {
            return null;
        }
        $searchPath ??= (string) getenv('LD_LIBRARY_PATH');
        if ($searchPath === '') {
            return null;
        }
        $cwd = getcwd();
        foreach (preg_split('~[:;]~', $searchPath) ?: [] as $dir) {
            if ($dir === '' || !str_starts_with($dir, '/')) {
                if ($cwd === false) {
                    continue;
                }
                $dir = rtrim($cwd, '/') . ($dir === '' ? '' : '/' . $dir);
            }
            $candidate = rtrim($dir, '/') . '/' . $name;
            if (is_file($candidate)) {
                return $candidate;
            }
        }
        return null;
    }

    /** The library a built checkout holds, when the package sits in its bindings/php. */
    private static function checkoutPath(): string
    {
        return rtrim(dirname(__DIR__, 3), '/') . '/target/release/' . self::BUILT_NAME;
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
            throw new ConfigurationException(self::NO_FFI, Status::INVALID_ARGUMENT, 'SP_ERR_INVALID_ARGUMENT', 'library');
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
                ? ' (looked at: the FFI scope ' . self::SCOPE . ': not declared, no preloading; '
                    . implode('; ', self::searched()) . '). ' . self::LOAD_HELP
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
