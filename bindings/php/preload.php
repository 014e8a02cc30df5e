<?php

declare(strict_types=1);

/*
 * opcache.preload script: declares the FFI scope "SLOTPARTNER" and preloads the binding's
 * classes once per server start. php.ini (PHP-FPM, Apache mod_php, or the CLI with
 * opcache.enable_cli=1):
 *
 *   opcache.preload=/path/to/bindings/php/preload.php
 *       ; under Composer: /path/to/project/vendor/slotpartner/slotpartner/preload.php
 *   opcache.preload_user=www-data        ; required when PHP starts as root
 *   ffi.enable=preload                   ; the default
 *   ; only when PHP starts as root (FFI::load() cannot run in the preloading child):
 *   ffi.preload=/path/to/slotpartner-preload.h   ; written by bin/slotpartner-preload-header
 *
 * The library is found as at run time (SLOTPARTNER_LIB, the checkout's target/release, or the
 * system loader), at server start. Restart the server after replacing the library.
 */

require __DIR__ . '/autoload.php';

SlotPartner\Preloader::run();
