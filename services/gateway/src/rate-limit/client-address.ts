import ipaddr from "ipaddr.js";

/**
 * The bucket a per-address limit counts a client in, from `req.ip` (which honours TRUST_PROXY):
 * an IPv4 address as it is; an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, how a dual-stack socket
 * reports an IPv4 client) as that IPv4 address; any other IPv6 address as its /64 network
 * (`2001:db8:1:2::/64`). A /64 is the smallest block a provider hands a subscriber, and a host
 * may pick any address inside it (RFC 8981 temporary addresses), so counting whole addresses would
 * let one client escape the limit by rotating them. Anything that is not an IP address ("unknown").
 */
export function clientAddressKey(ip: string | undefined): string {
  if (ip === undefined || !ipaddr.isValid(ip)) return "unknown";
  const addr = ipaddr.process(ip);
  if (addr.kind() === "ipv4") return addr.toString();
  const network = new ipaddr.IPv6([...(addr as ipaddr.IPv6).parts.slice(0, 4), 0, 0, 0, 0]);
  return `${network.toString()}/64`;
}
