#!/usr/bin/env python3
"""Drives the operator's dashboard in headless Chromium (Debian's chromium and chromedriver, through Selenium):
sign in with the admin key, find an account by a transaction id, read its timeline, settle an open order with a
note, open the revenue page from the nav, read its figures, measure its charts and download one of its CSV files.
Screenshots of each page are checked: the account page and the settled order by OCR (tesseract), the overview and the
revenue page for their charts' colour. Prints one JSON object of what it saw; exits 1 when a step fails."""
import argparse
import json
import os
import subprocess
import sys
import time

from PIL import Image
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as arrived
from selenium.webdriver.support.ui import WebDriverWait

BAR = (0x2F, 0x6F, 0xDF)


def ocr(path):
    """The words tesseract reads on a screenshot, lower-cased."""
    out = subprocess.run(["tesseract", path, "-", "--psm", "3"], capture_output=True, text=True, check=True)
    return out.stdout.lower()


def has_colour(path, colour, tolerance=6):
    image = Image.open(path).convert("RGB")
    return any(all(abs(a - b) <= tolerance for a, b in zip(pixel, colour)) for pixel in image.getdata())


def downloaded(folder, name, seconds=15):
    """The text of `name` once Chromium has finished writing it to `folder` (it writes a .crdownload first)."""
    path = os.path.join(folder, name)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.path.exists(path) and not os.path.exists(path + ".crdownload"):
            with open(path, encoding="utf-8") as file:
                return file.read()
        time.sleep(0.2)
    raise TimeoutError(f"{name} was not downloaded; {folder} holds {os.listdir(folder)}")


def gone(element):
    """A wait's condition: `element`'s page was replaced. Chromium says so as a stale reference, or, when asked while
    the next document replaces it, as an inspector error that the node "does not belong to the document"."""
    def check(_):
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return True
            raise
    return check


def revenue(driver, wait, out, seen):
    """The revenue page, reached from the nav: its figures, its charts' boxes, a CSV file downloaded through its link."""
    seen["steps"].append("revenue")
    nav = driver.find_element(By.CSS_SELECTOR, "nav a[href='/dashboard/revenue']")
    nav.click()
    wait.until(gone(nav))
    wait.until(arrived.presence_of_element_located((By.ID, "figures")))
    seen["revenueHeading"] = driver.find_element(By.TAG_NAME, "h1").text
    seen["revenueFigures"] = {name: driver.find_element(By.ID, name).text
                              for name in ("active-subscriptions", "active-trials", "grace-period", "billing-retry")}
    seen["revenueMrr"] = [card.text for card in driver.find_elements(By.CSS_SELECTOR, ".card.mrr")]
    seen["revenueAllTime"] = driver.find_element(By.ID, "revenue-all").text
    charts = {}
    for figure in driver.find_elements(By.CSS_SELECTOR, ".charts figure"):
        svg = figure.find_element(By.TAG_NAME, "svg").rect
        lines = [line.rect for line in figure.find_elements(By.TAG_NAME, "polyline")]
        charts[figure.get_attribute("id")] = {"width": svg["width"], "height": svg["height"], "lines": len(lines),
                                              "linesWidth": min((line["width"] for line in lines), default=0)}
    seen["revenueCharts"] = charts
    # The whole page in one picture: the window grown to the document's height, then back.
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, max(1400, height + 200))
    driver.save_screenshot(out + "/revenue.png")
    driver.set_window_size(1280, 1400)
    seen["revenueChartDrawn"] = has_colour(out + "/revenue.png", BAR)
    seen["revenueScreenshotWords"] = [w for w in ("revenue", "mrr", "cohorts") if w in ocr(out + "/revenue.png")]
    seen["steps"].append("revenue CSV")
    link = driver.find_element(By.CSS_SELECTOR, "a.csv[href='/dashboard/revenue.csv?what=overview']")
    link.click()
    seen["revenueCSV"] = downloaded(out + "/downloads", "iapkit-overview.csv").splitlines()
    seen["steps"].append("revenue by week")
    week = driver.find_element(By.CSS_SELECTOR, "#intervals a[href='/dashboard/revenue?interval=week']")
    week.click()
    wait.until(gone(week))
    wait.until(arrived.presence_of_element_located((By.CSS_SELECTOR, "#intervals a.current[href$='interval=week']")))
    seen["revenueWeekCharts"] = len(driver.find_elements(By.CSS_SELECTOR, ".charts figure svg polyline"))


def main():
    parser = argparse.ArgumentParser()
    for name in ("base", "key", "transaction", "account", "order", "out"):
        parser.add_argument("--" + name, required=True)
    args = parser.parse_args()
    seen = {"steps": []}

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1400",
                 "--force-device-scale-factor=1"):
        options.add_argument(flag)
    os.makedirs(args.out + "/downloads", exist_ok=True)
    options.add_experimental_option("prefs", {"download.default_directory": args.out + "/downloads",
                                              "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    # Headless Chromium saves a download only where it is told to.
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": args.out + "/downloads"})
    driver.set_page_load_timeout(30)
    wait = WebDriverWait(driver, 20)

    def submit(button, then):
        """Clicks and waits for the next page: the old page's element gone stale, then `then` present."""
        button.click()
        wait.until(gone(button))
        return wait.until(arrived.presence_of_element_located(then))

    try:
        driver.get(args.base + "/dashboard")
        seen["signedOutLandsOn"] = driver.current_url.removeprefix(args.base)

        seen["steps"].append("sign in")
        driver.find_element(By.ID, "key").send_keys(args.key)
        submit(driver.find_element(By.ID, "signin"), (By.CSS_SELECTOR, ".charts"))
        seen["afterSignIn"] = driver.current_url.removeprefix(args.base)
        seen["overviewHeading"] = driver.find_element(By.TAG_NAME, "h1").text
        cookie = driver.get_cookie("iapkit_dashboard") or {}
        seen["cookie"] = {"httpOnly": cookie.get("httpOnly"), "sameSite": cookie.get("sameSite"), "path": cookie.get("path")}
        seen["documentCookieHidden"] = "iapkit_dashboard" not in driver.execute_script("return document.cookie")
        driver.save_screenshot(args.out + "/overview.png")
        seen["overviewChartDrawn"] = has_colour(args.out + "/overview.png", BAR)

        seen["steps"].append("search")
        search = driver.find_element(By.NAME, "q")
        search.send_keys(args.transaction)
        submit(driver.find_element(By.ID, "search"), (By.ID, "timeline"))
        seen["searchLandsOn"] = driver.current_url.removeprefix(args.base)
        seen["accountShown"] = driver.find_element(By.ID, "account").text
        seen["timelineHasTransaction"] = args.transaction in driver.find_element(By.ID, "timeline").text
        seen["ownedText"] = driver.find_element(By.ID, "owned").text
        driver.save_screenshot(args.out + "/account.png")
        seen["accountScreenshotWords"] = [w for w in ("timeline", "owns now", args.account.lower()) if w in ocr(args.out + "/account.png")]

        seen["steps"].append("settle")
        driver.get(args.base + "/dashboard/orders?state=created")
        wait.until(arrived.presence_of_element_located((By.ID, "order-" + args.order)))
        row = driver.find_element(By.ID, "order-" + args.order)
        row.find_element(By.NAME, "note").send_keys("refunded by support in the browser")
        seen["flash"] = submit(row.find_element(By.TAG_NAME, "button"), (By.ID, "flash")).text
        driver.save_screenshot(args.out + "/settled.png")
        seen["settledScreenshotWords"] = [w for w in ("settled", args.order[:8].lower()) if w in ocr(args.out + "/settled.png")]

        revenue(driver, wait, args.out, seen)
        seen["ok"] = True
    except Exception as error:  # reported to the test, which fails on it
        seen["ok"] = False
        seen["error"] = f"{type(error).__name__}: {error}"
        try:
            driver.save_screenshot(args.out + "/failure.png")
            seen["failurePage"] = driver.page_source[:4000]
        except Exception:
            pass
    finally:
        driver.quit()
    print(json.dumps(seen))
    return 0 if seen["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
