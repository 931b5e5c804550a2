//! The JSON Schema of the cluster file (`crc-appliance schema`), derived
//! from the [`super::raw`] types so it cannot drift from what the parser
//! accepts: field names as written (camelCase, `applianceIP`, …), doc
//! comments as descriptions, serde defaults as `default`, and
//! `deny_unknown_fields` as `additionalProperties: false` (an editor flags a
//! misspelt key as the parser would).
//!
//! Draft-07: the draft yaml-language-server and most editors support
//! fully. The schema describes the shape only; the rules across fields
//! (addresses inside the cidr, unique MACs, …) stay with `validate`.

use schemars::generate::SchemaSettings;

use super::raw::ClusterFile;

/// Where the schema says it lives (`$id`); editors key caches on it.
pub const ID: &str = "https://crc-appliance.invalid/schema/cluster.json";

pub fn json_schema() -> serde_json::Value {
    let mut schema = SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<ClusterFile>();
    schema.insert("$id".into(), ID.into());
    schema.insert("title".into(), "crc-appliance cluster file".into());
    schema.insert(
        "description".into(),
        "One OpenShift 4 UPI cluster: its network, nodes and the services crc-appliance runs \
         for it (docs/configuration.md)."
            .into(),
    );
    schema.to_value()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every object schema, with its JSON pointer.
    fn objects<'a>(
        v: &'a serde_json::Value,
        at: String,
        out: &mut Vec<(String, &'a serde_json::Value)>,
    ) {
        match v {
            serde_json::Value::Object(m) => {
                if m.get("type").and_then(|t| t.as_str()) == Some("object")
                    && m.contains_key("properties")
                {
                    out.push((at.clone(), v));
                }
                for (k, x) in m {
                    objects(x, format!("{at}/{k}"), out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    objects(x, format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_section_is_closed_and_named_as_written() {
        let s = json_schema();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
        let mut all = Vec::new();
        objects(&s, String::new(), &mut all);
        assert!(all.len() > 20, "{}", all.len());
        for (at, o) in &all {
            assert_eq!(o["additionalProperties"], false, "{at} is open");
        }
        let network = &s["definitions"]["Network"]["properties"];
        for k in ["cidr", "applianceIP", "apiVIP", "upstreamDNS", "addressing"] {
            assert!(network.get(k).is_some(), "network.{k}: {network}");
        }
        let node = &s["definitions"]["Node"]["properties"];
        for k in ["addressing", "interface"] {
            assert!(node.get(k).is_some(), "nodes[].{k}: {node}");
        }
        let required = s["required"].as_array().unwrap();
        assert!(required.contains(&"nodes".into()), "{required:?}");
        assert!(!required.contains(&"dns".into()), "{required:?}");
        assert_eq!(
            s["definitions"]["Dns"]["properties"]["ttl"]["default"],
            "30s"
        );
    }
}
