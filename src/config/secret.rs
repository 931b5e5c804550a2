//! The admin API token file: where it is checked (validation: exists, a
//! regular file, not readable by group or others) and read (the admin
//! service and the CLI). The token never enters the configuration types,
//! so it cannot be printed with them; [`SecretFileError`] names the file,
//! never its content.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Shortest token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why a file cannot hold a secret (a token, a private key, a BMC
/// credential): the file and the fix, never the content.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    /// The file cannot be looked at or read.
    #[error("{}: {err}", path.display())]
    Unreadable { path: PathBuf, err: std::io::Error },
    /// A directory, a device, a socket…
    #[error("{} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    /// Group or others may read it.
    #[error(
        "{} has mode {mode:04o}: it must not be readable by group or others (chmod 600)",
        path.display()
    )]
    Exposed { path: PathBuf, mode: u32 },
    /// Its first line is not a token (too short, or not visible ASCII).
    #[error(
        "{} must hold a token of at least {MIN_TOKEN_LEN} visible ASCII characters on its first line",
        path.display()
    )]
    NotAToken { path: PathBuf },
    /// A credential file whose first line is empty.
    #[error("{} has an empty first line", path.display())]
    EmptyFirstLine { path: PathBuf },
}

impl SecretFileError {
    /// The error of reading `path`.
    fn unreadable(path: &Path) -> impl FnOnce(std::io::Error) -> SecretFileError {
        let path = path.to_path_buf();
        move |err| SecretFileError::Unreadable { path, err }
    }
}

/// Why `path` cannot hold a secret, if it cannot: it must be a regular
/// file, and with `private` not readable by group or others. (Also the
/// rule for the BMC credential files, `nodes[].bmc`.)
pub fn check_secret_file(path: &Path, private: bool) -> Result<(), SecretFileError> {
    let meta = std::fs::metadata(path).map_err(SecretFileError::unreadable(path))?;
    if !meta.is_file() {
        return Err(SecretFileError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if private && mode & 0o077 != 0 {
        return Err(SecretFileError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// Why `path` cannot hold the token, if it cannot.
pub fn check_token_file(path: &Path) -> Result<(), SecretFileError> {
    check_secret_file(path, true)?;
    read_token(path).map(|_| ())
}

/// The token in `path`: its first line, trimmed; at least
/// [`MIN_TOKEN_LEN`] visible ASCII characters.
pub fn read_token(path: &Path) -> Result<String, SecretFileError> {
    let text = std::fs::read_to_string(path).map_err(SecretFileError::unreadable(path))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < MIN_TOKEN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SecretFileError::NotAToken {
            path: path.to_path_buf(),
        });
    }
    Ok(token)
}

/// The first line of a credential file (line ending removed); an error
/// when it is empty. The message names the file, never the content.
pub fn read_first_line(path: &Path) -> Result<String, SecretFileError> {
    let text = std::fs::read_to_string(path).map_err(SecretFileError::unreadable(path))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(SecretFileError::EmptyFirstLine {
            path: path.to_path_buf(),
        });
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
        let text = |r: Result<(), SecretFileError>| r.unwrap_err().to_string();
        let at = |s: &str| format!("{}{s}", f.display());
        assert_eq!(
            text(check_token_file(&f)),
            at(": No such file or directory (os error 2)")
        );
        std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            text(check_token_file(&f)),
            at(" has mode 0644: it must not be readable by group or others (chmod 600)")
        );
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_token_file(&f).unwrap();
        assert_eq!(read_token(&f).unwrap(), "0123456789abcdef0123");
        std::fs::write(&f, "short\n").unwrap();
        assert_eq!(
            text(check_token_file(&f)),
            at(" must hold a token of at least 16 visible ASCII characters on its first line")
        );
        assert_eq!(
            text(check_token_file(dir.path())),
            format!("{} is not a regular file", dir.path().display())
        );
        std::fs::write(&f, "\nsecond\n").unwrap();
        assert_eq!(
            read_first_line(&f).unwrap_err().to_string(),
            at(" has an empty first line")
        );
    }
}
