<?php

declare(strict_types=1);

// The binding and slotpartner_ffi.h agree: every declared function is callable through the
// loaded FFI object, every sp_ function the binding calls is declared, and the constants match.

require __DIR__ . '/helper.php';

use SlotPartner\Library;
use SlotPartner\Status;
use SlotPartner\TrustRoots;

$header = (string) file_get_contents(Library::headerPath());

/**
 * The functions of the header: name => list of parameter declarations.
 *
 * @return array<string, list<string>>
 */
function declaredFunctions(string $header): array
{
    preg_match_all('/^(?:[\w ]+?)\s*\*?\s*\b(sp_\w+)\(([^)]*)\);/m', $header, $m, PREG_SET_ORDER);
    $functions = [];
    foreach ($m as [, $name, $params]) {
        $params = trim(preg_replace('/\s+/', ' ', $params) ?? '');
        $functions[$name] = $params === 'void' || $params === '' ? [] : array_map('trim', explode(',', $params));
    }
    return $functions;
}

$functions = declaredFunctions($header);

T::test('every declared function is callable', function () use ($functions): void {
    T::true(count($functions) >= 40, 'found the declarations: ' . count($functions));
    $ffi = Library::ffi();
    foreach ($functions as $name => $params) {
        // NULL for every pointer, 0 or false otherwise: each function must refuse or ignore it.
        $args = array_map(static fn (string $p): mixed => str_contains($p, '*') ? null : (str_starts_with($p, 'bool') ? false : 0), $params);
        $result = $ffi->$name(...$args);
        if (str_ends_with($name, '_free')) {
            T::true(!is_int($result), $name . '(NULL) returns, without a status');
        } elseif ($name === 'sp_version' || $name === 'sp_status_name' || $name === 'sp_http_reason') {
            T::true(is_string($result) && $result !== '', $name . ' gives a string');
        } elseif ($name === 'sp_last_error_message' || $name === 'sp_last_error_field') {
            T::true($result instanceof FFI\CData, $name . ' gives an sp_str');
        } elseif ($name === 'sp_last_error_response') {
            T::true(in_array($result, [Status::OK, Status::INVALID_ARGUMENT], true), $name . ' gives a status');
        } elseif ($name === 'sp_event_reply_pruned') {
            T::true($result === false, $name . '(NULL) is false: no claim');
        } else {
            T::eq(Status::INVALID_ARGUMENT, $result, $name . ' refuses NULL arguments');
        }
    }
});

T::test('the binding calls only declared functions, and all of them but twelve', function () use ($functions): void {
    $used = [];
    foreach (glob(PACKAGE . '/src/*.php') ?: [] as $file) {
        preg_match_all('/->(sp_\w+)\(/', (string) file_get_contents($file), $m);
        foreach ($m[1] as $name) {
            $used[$name] = true;
        }
    }
    foreach (array_keys($used) as $name) {
        T::true(isset($functions[$name]), $name . ' is declared');
    }
    // sp_last_error_message/_field/_response: the binding reads the whole failure with
    // sp_last_error instead. sp_event_field: it copies every extra field into Event::$extra.
    // sp_receiver_reply_balance: it completes a balance reply the library built once per
    // currency with the amounts, in PHP, without a call. sp_endpoint_new, _from_settings and
    // _set_retry_after: Endpoint finds its endpoint with sp_endpoint_shared (retry_after among
    // the settings), the one call PHP-FPM's requests need. sp_endpoint_from_environment,
    // sp_endpoint_receive_cgi, sp_exchange_write_cgi and sp_http_reason: a CGI program's, where
    // PHP has its SAPI.
    $unused = array_values(array_diff(array_keys($functions), array_keys($used)));
    sort($unused);
    $expected = ['sp_endpoint_from_environment', 'sp_endpoint_from_settings', 'sp_endpoint_new', 'sp_endpoint_receive_cgi', 'sp_endpoint_set_retry_after', 'sp_event_field', 'sp_exchange_write_cgi', 'sp_http_reason', 'sp_last_error_field', 'sp_last_error_message', 'sp_last_error_response', 'sp_receiver_reply_balance'];
    T::eq($expected, $unused, 'declared functions the binding does not call');
});

T::test('constants match the header', function () use ($header): void {
    preg_match('/typedef enum sp_status \{(.*?)\} sp_status;/s', $header, $body);
    preg_match_all('/SP_(OK|ERR_\w+) = (\d+)/', $body[1] ?? '', $m, PREG_SET_ORDER);
    $declared = [];
    foreach ($m as [, $name, $value]) {
        $declared[$name === 'OK' ? 'OK' : substr($name, 4)] = (int) $value;
    }
    T::eq($declared, (new ReflectionClass(Status::class))->getConstants(), 'Status has every sp_status code');
    preg_match_all('/SP_TRUST_ROOTS_(\w+) = (\d+)/', $header, $m, PREG_SET_ORDER);
    $roots = [];
    foreach ($m as [, $name, $value]) {
        $roots[str_replace('_', '', ucwords(strtolower($name), '_'))] = (int) $value;
    }
    $cases = [];
    foreach (TrustRoots::cases() as $case) {
        $cases[$case->name] = $case->value;
    }
    T::eq($roots, $cases, 'TrustRoots has every sp_trust_roots value');
    preg_match_all('/SP_RECOVERY_(\w+) = (\d+)/', $header, $m, PREG_SET_ORDER);
    $reasons = [];
    foreach ($m as [, $name, $value]) {
        $reasons[str_replace('_', '', ucwords(strtolower($name), '_'))] = (int) $value;
    }
    $cases = [];
    foreach (SlotPartner\RecoveryReason::cases() as $case) {
        $cases[$case->name] = $case->value;
    }
    T::eq(4, count($reasons), 'four sp_recovery_reason values');
    T::eq($reasons, $cases, 'RecoveryReason has every sp_recovery_reason value');
    preg_match_all('/SP_EVENT_KIND_(\w+) = (\d+)/', $header, $m, PREG_SET_ORDER);
    $kinds = [];
    foreach ($m as [, $name, $value]) {
        $kinds['KIND_' . $name] = (int) $value;
    }
    unset($kinds['KIND_OTHER']);
    $constants = (new ReflectionClass(SlotPartner\Event::class))->getConstants();
    T::eq($kinds, array_filter($constants, static fn (string $k): bool => str_starts_with($k, 'KIND_'), ARRAY_FILTER_USE_KEY), 'Event knows the typed kinds');
    preg_match('/typedef enum sp_sql_kind \{(.*?)\} sp_sql_kind;/s', $header, $body);
    preg_match_all('/SP_(SQL_\w+) = (\d+)/', $body[1] ?? '', $m, PREG_SET_ORDER);
    $sqlKinds = [];
    foreach ($m as [, $name, $value]) {
        $sqlKinds[$name] = (int) $value;
    }
    unset($sqlKinds['SQL_BLOB']);   // a PHP string is sent as text
    $constants = (new ReflectionClass(SlotPartner\Native::class))->getConstants();
    T::eq($sqlKinds, array_filter($constants, static fn (string $k): bool => str_starts_with($k, 'SQL_') && is_int($constants[$k]) && !str_ends_with($k, '_KEPT'), ARRAY_FILTER_USE_KEY), 'Native knows the sp_sql_kind values it sends');
});

T::test('library, header and declarations', function () use ($header): void {
    preg_match('/^version = "([^"]+)"/m', (string) file_get_contents(ROOT . '/Cargo.toml'), $m);
    T::eq($m[1] ?? null, Library::version(), 'sp_version() is the crate version');
    T::eq('cdef', Library::source(), 'loaded with FFI::cdef (no preloading here)');
    T::eq(10, substr_count($header, 'const uint8_t *'), 'ten byte buffers in the header (the bodies of handle, handle_record, parse and endpoint_receive, PEM, JSON parameters, a reply to store, an exchange\'s reply, an event\'s strings, a staged statement\'s text parameter)');
    T::eq(str_replace('const uint8_t *', 'const char *', $header), Library::declarations(), 'the declarations differ from the header only there');
    T::eq(realpath(ROOT . '/target/release/libslotpartner.so'), realpath(Library::libraryPath()), 'the library found is the checkout\'s (or SLOTPARTNER_LIB)');
});

T::test('loading failures are ConfigurationExceptions that say what to do', function (): void {
    $script = 'require "' . PACKAGE . '/autoload.php"; try { new SlotPartner\\Receiver("x"); } catch (SlotPartner\\ConfigurationException $e) { echo $e->field, ": ", $e->getMessage(); }';
    [, $out] = runPhp(['-r', $script], ['SLOTPARTNER_LIB' => '/nonexistent/libslotpartner.so']);
    T::true(str_starts_with($out, 'library: cannot load /nonexistent/libslotpartner.so') && str_contains($out, 'SLOTPARTNER_LIB'), 'a missing library: ' . $out);
    [, $out] = runPhp(['-d', 'ffi.enable=0', '-r', $script]);
    T::true(str_contains($out, 'FFI is disabled: ffi.enable=0'), 'FFI disabled: ' . $out);
});

T::finish();
