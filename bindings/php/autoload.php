<?php

declare(strict_types=1);

/*
 * PSR-4 autoloader for SlotPartner\ classes when the package is used without Composer (copied
 * into a project, or run from the checkout). With Composer, vendor/autoload.php does the same.
 */
spl_autoload_register(static function (string $class): void {
    $prefix = 'SlotPartner\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
