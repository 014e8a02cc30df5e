<?php

/*
 * PSR-4 autoloader for SlotPartner\ classes when the package is used without Composer (copied
 * into a project, or run from the checkout). With Composer, vendor/autoload.php does the same.
 *
 * Written in syntax PHP 5.4 and later parse, so that on an older PHP than the binding needs it
 * says which one is needed (PhpVersion::check) instead of failing on the first newer feature.
 */
spl_autoload_register(static function ($class) {
    $prefix = 'SlotPartner\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});

SlotPartner\PhpVersion::check(PHP_VERSION);
