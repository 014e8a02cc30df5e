<?php

namespace SlotPartner;

/*
 * Written in syntax PHP 5.4 and later parse (no declare, no types): it runs
 * first on the PHP it has to refuse.
 */

/**
 * The PHP version the binding needs, checked by autoload.php before any class of the binding
 * loads: on an older PHP, the first class would otherwise fail with a parse or type error that
 * names no version. With Composer, its platform check does the same from composer.json.
 */
final class PhpVersion
{
    /** The oldest PHP supported: composer.json's require.php (a test checks they agree). */
    const REQUIRED = '8.2';

    /**
     * Throws a RuntimeException naming the PHP needed and the one running when $version (such
     * as PHP_VERSION) is older than REQUIRED.
     *
     * @param string $version
     */
    public static function check($version)
    {
        if (version_compare($version, self::REQUIRED, '<')) {
            throw new \RuntimeException('slotpartner needs PHP ' . self::REQUIRED . ' or newer (composer.json: "php": ">='
                . self::REQUIRED . '"); this is PHP ' . $version . ' (' . PHP_BINARY . ')');
        }
    }
}
