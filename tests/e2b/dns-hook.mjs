// Wildcard DNS for the tests that use the SDKs by domain (node --import ./dns-hook.mjs): names
// under $NSBOX_TEST_DOMAIN resolve to the loopback, as *.DOMAIN would to a real front proxy;
// every other name resolves as usual.
import dns from "node:dns";

const domain = process.env.NSBOX_TEST_DOMAIN;
const lookup = dns.lookup;
dns.lookup = function (host, opts, cb) {
        if (typeof opts === "function") {
                cb = opts;
                opts = {};
        }
        if (domain && typeof host === "string" && (host === domain || host.endsWith("." + domain))) {
                if (opts && opts.all) return process.nextTick(cb, null, [{ address: "127.0.0.1", family: 4 }]);
                return process.nextTick(cb, null, "127.0.0.1", 4);
        }
        return lookup.call(this, host, opts, cb);
};
