# crc-appliance: send ocp4.example.com and its reverse zones to the appliance.
# PowerShell on the Windows DNS server (DnsServer module), as an administrator.
Add-DnsServerConditionalForwarderZone -Name "ocp4.example.com" -MasterServers "192.168.131.1","fd00:131::1" -PassThru
Add-DnsServerConditionalForwarderZone -Name "131.168.192.in-addr.arpa" -MasterServers "192.168.131.1","fd00:131::1" -PassThru
Add-DnsServerConditionalForwarderZone -Name "0.0.0.0.0.0.0.0.1.3.1.0.0.0.d.f.ip6.arpa" -MasterServers "192.168.131.1","fd00:131::1" -PassThru
