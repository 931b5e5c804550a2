//! The admin API token file: where it is checked (validation: exists, a
//! regular file, not readable by group or others) and read (the admin
//! service and the CLI). The token never enters the configuration types,
//! so it cannot be printed with them.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// Shortest token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why `path` cannot hold a secret, if it cannot: it must be a regular
/// file, and with `private` not readable by group or others. (Also the
/// rule for the BMC credential files, `nodes[].bmc`.)
pub fn check_secret_file(path: &Path, private: bool) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mode = meta.permissions().mode() & 0o777;
    if private && mode & 0o077 != 0 {
        return Err(format!(
            "{} has mode {mode:04o}: it must not be readable by group or others (chmod 600)",
            path.display()
        ));
    }
    Ok(())
}

/// Why `path` cannot hold the token, if it cannot.
pub fn check_token_file(path: &Path) -> Result<(), String> {
    check_secret_file(path, true)?;
    read_token(path).map(|_| ())
}

/// The token in `path`: its first line, trimmed; at least
/// [`MIN_TOKEN_LEN`] visible ASCII characters.
pub fn read_token(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "{} must hold a token of at least {MIN_TOKEN_LEN} visible ASCII characters on its first line",
            path.display()
        ));
    }
    Ok(token)
}

/// The first line of a credential file (line ending removed); an error
/// when it is empty. The message names the file, never the content.
pub fn read_first_line(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(format!("{} has an empty first line", path.display()));
    }
    Ok(line.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_file_rules() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        assert!(check_token_file(&f).is_err(), "missing");
        std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = check_token_file(&f).unwrap_err();
        assert!(e.contains("mode 0644"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(check_token_file(&f), Ok(()));
        assert_eq!(read_token(&f).unwrap(), "0123456789abcdef0123");
        std::fs::write(&f, "short\n").unwrap();
        assert!(check_token_file(&f).unwrap_err().contains("at least 16"));
        assert!(
            check_token_file(dir.path())
                .unwrap_err()
                .contains("regular file")
        );
    }
}
